package gate

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// Wake is how long after a fault's window ends a branch still counts as
// reached under it: a step deadline armed while the fault held its
// component expires up to a step timeout later, and the branch it takes
// is the fault's doing. An instant fault (an injected ambiguity, a
// failpoint firing, a broker error) has only a wake.
const Wake = 5 * time.Second

// Branches is the branch × fault matrix over a set of runs: for every
// reachability marker the target declares (a branch of its saga: a step
// timing out in a given state, a decline after a timeout, a redelivered
// message …), in how many runs it was reached, in how many while a fault
// was active (or in its Wake), in how many while a fault held the very
// component that took the branch, and under which fault kinds. A declared
// branch that no run reached under a fault is a hole: the harness never
// made the target take it the hard way.
type Branches struct {
	Runs  int
	Rows  []BranchRow
	Kinds []string // fault kinds seen in any cell, sorted
}

// BranchRow is one marker's row.
type BranchRow struct {
	Marker  targets.Failpoint
	Reached int            // runs in which the branch was taken
	Faulted int            // … while some fault was active
	Own     int            // … while a fault held the marker's own component
	ByKind  map[string]int // fault kind → runs in which the branch was taken while a fault of that kind was active
}

// window is one fault's effect in time on some instances.
type window struct {
	kind       string
	start, end int64 // op times, ns
	all        bool  // a fault on the whole system (database, broker, world)
	instances  map[string]bool
}

// BranchCoverage reads the history of each run directory.
func BranchCoverage(runDirs []string, declared []targets.Failpoint) Branches {
	b := Branches{Runs: len(runDirs)}
	idx := map[string]int{}
	for _, fp := range declared {
		if fp.IsMarker() {
			idx[fp.Name] = len(b.Rows)
			b.Rows = append(b.Rows, BranchRow{Marker: fp, ByKind: map[string]int{}})
		}
	}
	kinds := map[string]bool{}
	for _, dir := range runDirs {
		h, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl"))
		if err != nil {
			continue
		}
		type hit struct {
			any, own bool
			kinds    map[string]bool
		}
		hits := map[string]*hit{}
		ws := windows(h)
		for _, op := range h.Ops {
			if op.F != models.FFailpoint || !strings.HasPrefix(op.Proc, models.ProcComponentPrefix) {
				continue
			}
			var ev models.FailpointEvent
			if op.Decode(&ev) != nil || ev.Fired {
				continue
			}
			i, ok := idx[ev.Failpoint]
			if !ok {
				continue
			}
			x := hits[ev.Failpoint]
			if x == nil {
				x = &hit{kinds: map[string]bool{}}
				hits[ev.Failpoint] = x
			}
			comp := b.Rows[i].Marker.Component
			for _, w := range ws {
				if op.T < w.start || op.T > w.end+int64(Wake) {
					continue
				}
				x.any = true
				x.kinds[w.kind] = true
				if w.all || ownedBy(w.instances, ev.Instance, comp) {
					x.own = true
				}
			}
		}
		for name, x := range hits {
			r := &b.Rows[idx[name]]
			r.Reached++
			if x.any {
				r.Faulted++
			}
			if x.own {
				r.Own++
			}
			for k := range x.kinds {
				r.ByKind[k]++
				kinds[k] = true
			}
		}
	}
	for k := range kinds {
		b.Kinds = append(b.Kinds, k)
	}
	sort.Strings(b.Kinds)
	return b
}

// ownedBy reports whether a fault on instances held the instance that
// took the branch (or, for a line without an instance, any instance of
// the marker's component).
func ownedBy(instances map[string]bool, instance, component string) bool {
	if instance != "" {
		return instances[instance]
	}
	for in := range instances {
		if in == component || strings.HasPrefix(in, component+"-") {
			return true
		}
	}
	return false
}

// windows are the faults of a history as they took effect: a start and
// its end, or an instant (a fired failpoint, a crash) with only its wake.
// A fault on a link holds the link's component; a fault without a target
// (the database, the broker, the world) holds every component.
func windows(h *models.History) []window {
	var out []window
	open := map[string]*window{}
	for _, op := range h.Ops {
		if op.Proc != models.ProcNemesis {
			continue
		}
		var fr models.FaultRecord
		if op.Decode(&fr) != nil || fr.Error != "" {
			continue
		}
		hold := func() *window {
			w := &window{kind: fr.Kind, start: op.T, end: op.T, instances: map[string]bool{}}
			switch {
			case fr.Kind == "failpoint" || fr.Kind == "crash":
				w.kind = "failpoint"
				if fr.Kind == "crash" {
					w.kind = "crash"
				}
				if in := fr.Detail["instance"]; in != "" {
					w.instances[in] = true
				} else if fr.Target != "" {
					w.instances[fr.Target] = true
				}
			case strings.Contains(fr.Target, "→"):
				from, to, _ := strings.Cut(fr.Target, "→")
				if from == "client" {
					from = to
				}
				w.instances[from] = true
			case fr.Target != "":
				w.instances[fr.Target] = true
			default:
				w.all = true
			}
			return w
		}
		switch fr.Phase {
		case models.PhaseStart:
			if fr.Kind == "failpoint" {
				continue // armed, not fired: nothing took effect yet
			}
			open[fr.ID] = hold()
		case models.PhaseEnd:
			if w := open[fr.ID]; w != nil {
				w.end = op.T
				out = append(out, *w)
				delete(open, fr.ID)
			}
		case models.PhaseInstant, models.PhaseFired:
			if fr.Kind == "failpoint" && fr.Phase != models.PhaseFired {
				continue
			}
			if fr.Kind == "restart" {
				continue
			}
			out = append(out, *hold())
		}
	}
	end := int64(0)
	if n := len(h.Ops); n > 0 {
		end = h.Ops[n-1].T
	}
	for _, w := range open { // a window the history ends inside
		w.end = end
		out = append(out, *w)
	}
	return out
}

// Holes lists the declared branches no run reached under a fault.
func (b Branches) Holes() []string {
	var out []string
	for _, r := range b.Rows {
		if r.Faulted == 0 {
			out = append(out, r.Marker.Name)
		}
	}
	return out
}

// Write prints the matrix.
func (b Branches) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "branch\treached\tfaulted\town\t%s\t\n", strings.Join(b.Kinds, "\t"))
	for _, r := range b.Rows {
		row := []string{r.Marker.Name, fmt.Sprint(r.Reached), fmt.Sprint(r.Faulted), fmt.Sprint(r.Own)}
		for _, k := range b.Kinds {
			row = append(row, fmt.Sprint(r.ByKind[k]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d runs; reached: runs that took the branch; faulted: … while a fault was active or in its %v wake; own: … while a fault held the component that took it; a kind's cell: … while a fault of that kind was active)\n", b.Runs, Wake)
}
