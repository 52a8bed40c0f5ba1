package reports

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"path"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/sagachaos/sagachaos/models"
)

//go:embed templates/index.html.tmpl
var indexTmplText string

var indexTmpl = template.Must(template.New("index").Funcs(tmplFuncs).Parse(indexTmplText))

// RunSummary is one run as the merged index sees it. Dir is the run
// directory relative to where index.html is written (links point at
// Dir/report.html).
type RunSummary struct {
	Dir     string
	Verdict models.Verdict
}

type indexModel struct {
	CSS                                     template.CSS
	Runs                                    []indexRun
	Groups                                  []sigGroup
	Total, NValid, NInvalid, NUnknown, NErr int
}

type indexRun struct {
	Link, Dir, Status, Target, Mutant, Scenario, Seed, Repro, First string
	Ops, Violations                                                 int
}

type sigGroup struct {
	Checker, Kind, Example, ExampleOrder string
	Runs, Violations                     int
	Seeds                                []indexRun
}

// WriteIndex writes the merged index.html over many runs (seeds, shards):
// totals, violations grouped by signature (checker + kind) with the runs and
// seeds that hit each, so a hundred seeds with one bug read as one bug, and
// every run with its verdict, scenario, seed and a link to its report.
// Nothing is capped. Strings pass through Redact and html/template.
func WriteIndex(w io.Writer, runs []RunSummary) error {
	m := indexModel{CSS: template.CSS(reportCSS), Total: len(runs)}
	sorted := append([]RunSummary(nil), runs...)
	rank := map[models.Status]int{models.Invalid: 0, models.Unknown: 1, models.Valid: 2}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Verdict, sorted[j].Verdict
		ra, rb := statusRank(a, rank), statusRank(b, rank)
		if ra != rb {
			return ra < rb
		}
		if a.Run.Scenario != b.Run.Scenario {
			return a.Run.Scenario < b.Run.Scenario
		}
		return a.Run.Seed < b.Run.Seed
	})
	groupIdx := map[string]int{}
	for _, rs := range sorted {
		v := rs.Verdict
		st := string(v.Status)
		if v.Error != "" {
			st = "error"
		}
		switch {
		case v.Error != "":
			m.NErr++
		case v.Status == models.Valid:
			m.NValid++
		case v.Status == models.Invalid:
			m.NInvalid++
		default:
			m.NUnknown++
		}
		ir := indexRun{Link: path.Join(filepath.ToSlash(rs.Dir), "report.html"), Dir: Redact(rs.Dir), Status: st,
			Target: Redact(v.Run.Target), Mutant: Redact(v.Run.Mutant), Scenario: Redact(v.Run.Scenario),
			Seed: strconv.FormatUint(v.Run.Seed, 10), Repro: Redact(v.Run.Repro), Ops: v.Ops}
		seenInRun := map[string]bool{}
		for _, r := range v.Results {
			for _, vi := range r.Violations {
				ir.Violations++
				checker := vi.Checker
				if checker == "" {
					checker = r.Checker
				}
				if ir.First == "" {
					ir.First = Redact(checker + "/" + vi.Kind)
				}
				key := checker + "\x00" + vi.Kind
				gi, ok := groupIdx[key]
				if !ok {
					gi = len(m.Groups)
					groupIdx[key] = gi
					m.Groups = append(m.Groups, sigGroup{Checker: Redact(checker), Kind: Redact(vi.Kind),
						Example: Redact(vi.Message), ExampleOrder: Redact(vi.Order)})
				}
				m.Groups[gi].Violations++
				if !seenInRun[key] {
					seenInRun[key] = true
					m.Groups[gi].Runs++
					m.Groups[gi].Seeds = append(m.Groups[gi].Seeds, ir)
				}
			}
		}
		m.Runs = append(m.Runs, ir)
	}
	// Patch the per-run violation counts into the group seed lists (they
	// were appended before the run's count was final).
	byLink := map[string]indexRun{}
	for _, r := range m.Runs {
		byLink[r.Link] = r
	}
	for gi := range m.Groups {
		for si, s := range m.Groups[gi].Seeds {
			m.Groups[gi].Seeds[si] = byLink[s.Link]
		}
	}
	sort.SliceStable(m.Groups, func(i, j int) bool { return m.Groups[i].Runs > m.Groups[j].Runs })
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, m); err != nil {
		return fmt.Errorf("render index: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

func statusRank(v models.Verdict, rank map[models.Status]int) int {
	if v.Error != "" {
		return -1
	}
	if r, ok := rank[v.Status]; ok {
		return r
	}
	return 1
}
