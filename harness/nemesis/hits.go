package nemesis

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// This file places each fault that took effect on the sagas' own clock:
// which saga moments it hit. A saga's moments are what the history already
// holds with a time: the broker records of the order (their broker
// timestamps, mapped onto the history's clock through the header's start),
// the world effects of the order and the client's accepted place-order.
// Nothing here reads anything but the history, so `sagachaos repro` can say
// whether a replay's faults met the sagas at the same steps as the
// original's, and `sagachaos explore` can count (fault kind × component ×
// saga step) as coverage.

// Milestone is one moment of one saga.
type Milestone struct {
	T     int64  // nanoseconds on the history's clock
	Order string // the aggregate
	// What is the record type ("ChargePayment"), the world effect
	// ("world/gateway charge declined") or "placed".
	What string
	// Record marks a broker record (What is its type); Source is the
	// service whose outbox it left.
	Record bool
	Source string
}

// Timeline is every saga's milestones, each order's in time order.
type Timeline struct {
	byOrder map[string][]Milestone
	orders  []string
}

// NewTimeline reads the milestones of h. Records without a broker
// timestamp, and every record when the header has no start time, are left
// out (nothing places them on the clock).
func NewTimeline(h *models.History) *Timeline {
	tl := &Timeline{byOrder: map[string][]Milestone{}}
	var started int64
	if ts, err := time.Parse(time.RFC3339Nano, h.Header.Started); err == nil {
		started = ts.UnixNano()
	}
	add := func(m Milestone) {
		if _, ok := tl.byOrder[m.Order]; !ok {
			tl.orders = append(tl.orders, m.Order)
		}
		tl.byOrder[m.Order] = append(tl.byOrder[m.Order], m)
	}
	for _, op := range h.Ops {
		if op.Order == "" {
			continue
		}
		switch {
		case op.Type == models.Event && op.Proc == models.ProcObserver:
			var ev models.EventRecord
			if started == 0 || op.Decode(&ev) != nil || ev.Timestamp == 0 {
				continue
			}
			add(Milestone{T: ev.Timestamp - started, Order: op.Order, What: op.F, Record: true, Source: ev.Source})
		case op.Type == models.Effect:
			var v struct {
				Status    string `json:"status"`
				Kind      string `json:"kind"`
				Replay    bool   `json:"replay"`
				Ambiguous string `json:"ambiguous"`
			}
			if op.Decode(&v) != nil || v.Replay {
				continue
			}
			what := op.Proc + " " + op.F
			for _, s := range []string{v.Status, v.Kind} {
				if s != "" {
					what += " " + s
				}
			}
			if v.Ambiguous != "" {
				what += " ambiguous-" + v.Ambiguous
			}
			add(Milestone{T: op.T, Order: op.Order, What: what})
		case op.Type == models.Ok && op.F == models.FPlaceOrder && strings.HasPrefix(op.Proc, models.ProcClientPfx):
			add(Milestone{T: op.T, Order: op.Order, What: "placed"})
		}
	}
	sort.Strings(tl.orders)
	for _, o := range tl.orders {
		ms := tl.byOrder[o]
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].T < ms[j].T })
	}
	return tl
}

// Orders lists the orders with milestones, sorted.
func (tl *Timeline) Orders() []string { return tl.orders }

// Of returns one order's milestones in time order.
func (tl *Timeline) Of(order string) []Milestone { return tl.byOrder[order] }

// InFlight returns, for every saga in flight at t (a milestone at or before
// t and another after it), its last milestone at or before t: the moment
// the saga was at.
func (tl *Timeline) InFlight(t int64) []Milestone {
	var out []Milestone
	for _, o := range tl.orders {
		ms := tl.byOrder[o]
		i := sort.Search(len(ms), func(i int) bool { return ms[i].T > t })
		if i == 0 || i == len(ms) {
			continue
		}
		out = append(out, ms[i-1])
	}
	return out
}

// Between returns the milestones in (a, b], sorted by time.
func (tl *Timeline) Between(a, b int64) []Milestone {
	var out []Milestone
	for _, o := range tl.orders {
		for _, m := range tl.byOrder[o] {
			if m.T > a && m.T <= b {
				out = append(out, m)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// Window is one fault that took effect, on the history's clock.
type Window struct {
	ID, Kind, Target string
	// From is when it took effect (its start, its instant op, or where an
	// armed fault fired); To is when it ended (From for an instant fault;
	// for a failpoint crash, when the component was back).
	From, To int64
	// Position is the workload position where it took effect.
	Position int
	// Components are the instances it acts on: its target instance, both
	// ends of its link that are instances, the instance a failpoint fired
	// in; every instance for a fault without a target (PostgreSQL, the
	// broker, the gateway).
	Components []string
	// Trigger is the event that started it, as the nemesis journaled it
	// (empty for an order-count trigger).
	Trigger string
}

// Global reports whether w acts on the whole system rather than on named
// components.
func (w Window) Global() bool { return w.Target == "" }

// Windows lists the faults of h that took effect, in the order they did.
func Windows(h *models.History) []Window {
	insts := Instances(h)
	open := map[string]int{}
	var out []Window
	crashOf := map[string]int{} // crash op id → window of the fault that fired it
	dropped := map[int]bool{}
	for _, e := range FaultJournal(h) {
		switch {
		case e.Failed:
			continue
		case e.Phase == models.PhaseStart || e.Phase == models.PhaseInstant && !armedOnly(e):
			w := Window{ID: e.ID, Kind: e.Kind, Target: e.Target, From: e.T, To: e.T, Position: e.Position, Trigger: e.Detail["trigger"]}
			w.Components = components(e.Kind, e.Target, e.Detail, insts)
			if e.Phase == models.PhaseStart {
				open[e.ID] = len(out)
			}
			out = append(out, w)
		case e.Phase == models.PhaseEnd:
			if i, ok := open[e.ID]; ok {
				out[i].To = e.T
				delete(open, e.ID)
				if e.Detail["hits"] == "0" {
					dropped[i] = true // armed for its window, never hit
				}
			}
		case e.Phase == models.PhaseFired:
			w := Window{ID: e.ID, Kind: e.Kind, Target: e.Target, From: e.T, To: e.T, Position: e.Position, Trigger: e.Detail["trigger"]}
			if in := e.Detail["instance"]; in != "" {
				w.Components = []string{in}
			}
			out = append(out, w)
		}
	}
	// A fired crash lasts until the component is back: the target's own
	// crash and restart ops ("crash", "restart", value detail "fired").
	for _, op := range h.Ops {
		if op.Proc != models.ProcNemesis || (op.F != "crash" && op.F != "restart") {
			continue
		}
		var fr models.FaultRecord
		if op.Decode(&fr) != nil {
			continue
		}
		if op.F == "crash" {
			for i := range out {
				if out[i].ID == fr.Detail["fired"] && out[i].Kind == "failpoint" {
					crashOf[fr.ID] = i
				}
			}
			continue
		}
		if i, ok := crashOf[fr.ID]; ok && op.T > out[i].To {
			out[i].To = op.T
		}
	}
	// Windows still open at the end of the history last until its end.
	if n := len(h.Ops); n > 0 {
		for _, i := range open {
			out[i].To = h.Ops[n-1].T
		}
	}
	kept := out[:0]
	for i, w := range out {
		if !dropped[i] {
			kept = append(kept, w)
		}
	}
	out = kept
	sort.SliceStable(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// Instances lists the run's component instances: the target declaration's,
// or (in a history without one) every component/<instance> proc.
func Instances(h *models.History) []string {
	var seen []string
	for _, op := range h.Ops {
		if op.Proc == models.ProcHarness && op.F == models.FTarget {
			var d models.TargetDecl
			if op.Decode(&d) == nil && len(d.Instances) > 0 {
				return d.Instances
			}
		}
		if in, ok := strings.CutPrefix(op.Proc, models.ProcComponentPrefix); ok && !slices.Contains(seen, in) {
			seen = append(seen, in)
		}
	}
	sort.Strings(seen)
	return seen
}

func components(kind, target string, detail map[string]string, insts []string) []string {
	if target == "" {
		return insts
	}
	if kind == "failpoint" {
		for _, k := range []string{"instance", "armed", "component"} {
			if in := detail[k]; in != "" {
				return []string{in}
			}
		}
	}
	var out []string
	for _, end := range strings.Split(target, "→") {
		if slices.Contains(insts, end) && !slices.Contains(out, end) {
			out = append(out, end)
		}
	}
	return out
}

// armedOnly is an entry that armed a fault without its taking effect.
func armedOnly(e JournalEntry) bool {
	return e.Effect == "armed" || (e.Kind == "failpoint" && e.Effect == "")
}

var replicaSuffix = regexp.MustCompile(`-[0-9]+$`)

// Process is the process of an instance ("relay-2" → "relay").
func Process(instance string) string { return replicaSuffix.ReplaceAllString(instance, "") }

// Hit is what one fault met: the moments of the sagas in flight when it
// took effect.
type Hit struct {
	Window
	// Moments counts the in-flight sagas by the moment they were at.
	Moments map[string]int
}

// Steps is the hit's moments as one sorted, comparable line
// ("2 ChargePayment, 1 StockReserved"); "no saga in flight" when none.
func (h Hit) Steps() string {
	if len(h.Moments) == 0 {
		return "no saga in flight"
	}
	keys := make([]string, 0, len(h.Moments))
	for k := range h.Moments {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if h.Moments[keys[i]] != h.Moments[keys[j]] {
			return h.Moments[keys[i]] > h.Moments[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", h.Moments[k], k)
	}
	return strings.Join(parts, ", ")
}

// sameSteps reports whether two placements of one fault found the sagas
// at mostly the same moments: at least half of the moments either met are
// moments both met (Jaccard similarity ≥ ½; none in flight in both is the
// same). Counts are left out — how many sagas sat at a step is timing —
// and so is exact set equality: with a dozen sagas in flight, one saga a
// step further along in the replay would make every replay "different".
func sameSteps(a, b Hit) bool {
	if len(a.Moments) == 0 && len(b.Moments) == 0 {
		return true
	}
	both, either := 0, len(b.Moments)
	for k := range a.Moments {
		if _, ok := b.Moments[k]; ok {
			both++
		} else {
			either++
		}
	}
	return 2*both >= either
}

// Hits places every fault of h that took effect on the saga timeline.
func Hits(h *models.History) []Hit {
	tl := NewTimeline(h)
	var out []Hit
	for _, w := range Windows(h) {
		hit := Hit{Window: w, Moments: map[string]int{}}
		for _, m := range tl.InFlight(w.From) {
			hit.Moments[m.What]++
		}
		out = append(out, hit)
	}
	return out
}
