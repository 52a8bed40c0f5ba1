package gate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// Coverage is the failpoint × fault matrix over a set of runs: for every
// declared failpoint, in how many runs it was reached, how often it fired
// (an armed action ran there), and which fault kinds were applied in the
// runs that reached it. A declared point that no run reached is a hole in
// the harness: the code behind it was never exercised under faults (the
// idea of Antithesis's "reachable" assertions).
type Coverage struct {
	Runs   int
	Points []PointCoverage
}

// PointCoverage is one row of the matrix.
type PointCoverage struct {
	Failpoint targets.Failpoint
	Reached   int            // runs in which the point was reached
	Fired     int            // firings of an armed action at the point
	Faults    map[string]int // fault kind → runs that reached the point and applied it
}

type fpLine struct {
	Instance  string `json:"instance"`
	Failpoint string `json:"failpoint"`
	Hit       int    `json:"hit"`
	Action    string `json:"action"`
}

// FailpointCoverage reads failpoints.jsonl and the fault journal of each run
// directory.
func FailpointCoverage(runDirs []string, declared []targets.Failpoint) (Coverage, error) {
	cov := Coverage{Runs: len(runDirs)}
	idx := map[string]int{}
	for _, fp := range declared {
		idx[fp.Name] = len(cov.Points)
		cov.Points = append(cov.Points, PointCoverage{Failpoint: fp, Faults: map[string]int{}})
	}
	for _, dir := range runDirs {
		reached := map[string]bool{}
		f, err := os.Open(filepath.Join(dir, "failpoints.jsonl"))
		if err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var l fpLine
				if json.Unmarshal(sc.Bytes(), &l) != nil {
					continue
				}
				i, ok := idx[l.Failpoint]
				if !ok {
					continue
				}
				reached[l.Failpoint] = true
				if l.Action != "" {
					cov.Points[i].Fired++
				}
			}
			f.Close()
		}
		kinds := map[string]bool{}
		if h, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl")); err == nil {
			for _, e := range nemesis.FaultJournal(h) {
				if !e.Failed {
					kinds[e.Kind] = true
				}
			}
		}
		for name := range reached {
			p := &cov.Points[idx[name]]
			p.Reached++
			for k := range kinds {
				p.Faults[k]++
			}
		}
	}
	return cov, nil
}

// Unreached lists the declared failpoints no run reached.
func (c Coverage) Unreached() []string {
	var out []string
	for _, p := range c.Points {
		if p.Reached == 0 {
			out = append(out, p.Failpoint.Name)
		}
	}
	return out
}

// Write prints the matrix as a table.
func (c Coverage) Write(w io.Writer) {
	kindSet := map[string]bool{}
	for _, p := range c.Points {
		for k := range p.Faults {
			kindSet[k] = true
		}
	}
	var kinds []string
	for k := range kindSet {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "failpoint\treached\tfired\t%s\t\n", strings.Join(kinds, "\t"))
	for _, p := range c.Points {
		row := []string{p.Failpoint.Name, fmt.Sprint(p.Reached), fmt.Sprint(p.Fired)}
		for _, k := range kinds {
			row = append(row, fmt.Sprint(p.Faults[k]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d runs; a cell counts runs that reached the failpoint and applied that fault kind)\n", c.Runs)
}
