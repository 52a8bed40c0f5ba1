package explore

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/models"
)

// Feature categories: the prefix of every feature name, and the order the
// page and the status line list them in.
const (
	// CatPoint: a failpoint or marker reached at all ("point relay.after-select").
	CatPoint = "point"
	// CatPointUnder: a failpoint or marker reached by an instance while a
	// fault acted on that instance (a fault on the whole system acts on
	// every instance), or within BranchWake after it ended
	// ("point-under payment.after-charge | kill").
	CatPointUnder = "point-under"
	// CatPointDuring: a failpoint or marker reached by an instance while
	// a fault acted on another process, or within BranchWake after it —
	// a branch one component takes because of what was done to another
	// ("point-during orders.timeout.charging | partition@payment").
	CatPointDuring = "point-during"
	// CatFired: an armed failpoint action ran ("fired relay.after-publish crash").
	CatFired = "fired"
	// CatTransition: a saga went from one moment to the next
	// ("transition ChargePayment→PaymentDeclined").
	CatTransition = "transition"
	// CatTransitionUnder: the same while a fault was active, with the
	// fault's kind and the process it acted on
	// ("transition-under ChargePayment→PaymentDeclined | latency@payment").
	CatTransitionUnder = "transition-under"
	// CatStep: a fault took effect while a saga sat at a moment — the
	// (fault kind × component × saga step) triple
	// ("step kill@payment | ChargePayment").
	CatStep = "step"
	// CatTrail: a final saga trail, as the target reports it
	// ("trail create-order,reserve-stock,release-stock,cancel-order").
	CatTrail = "trail"
	// CatTrailUnder: a final trail of a saga whose life overlapped a fault
	// of that kind ("trail-under create-order,cancel-order | db-crash").
	CatTrailUnder = "trail-under"
	// CatCrash: a component died without the nemesis killing it, or a
	// failpoint crash took it down ("crash relay").
	CatCrash = "crash"
)

// Categories lists the categories in display order.
var Categories = []string{CatPointUnder, CatPointDuring, CatStep, CatTransitionUnder, CatFired, CatTrailUnder, CatPoint, CatTransition, CatTrail, CatCrash}

// Wake is how long after a fault's window a component's behaviour still
// counts as under that fault: a killed component logs its points again when
// it restarts, which is when the window ends, and recovery is what a fault
// is for.
const Wake = time.Second

// BranchWake is the wake of a fault for the failpoints and markers
// reached after it, the same as the branch × fault matrix's (package
// gate): a step deadline armed while the fault held its component expires
// up to a step timeout later, and the branch the target takes then (a
// marker such as a step timing out) is the fault's doing.
const BranchWake = 5 * time.Second

// Signature is the coverage of one run: a sorted set of features, each
// "<category> <what>". It is a pure function of the history: what a
// checker may read, a signature may read.
type Signature []string

// Category returns the category of a feature.
func Category(feature string) string {
	c, _, _ := strings.Cut(feature, " ")
	return c
}

// Compute reads the coverage signature of a run from its history.
func Compute(h *models.History) Signature {
	set := map[string]bool{}
	add := func(cat, format string, a ...any) { set[cat+" "+fmt.Sprintf(format, a...)] = true }

	windows := nemesis.Windows(h)
	underWake := func(t int64, instance string, wake time.Duration) []nemesis.Window {
		var out []nemesis.Window
		for _, w := range windows {
			if t >= w.From && t <= w.To+int64(wake) && (instance == "" || slices.Contains(w.Components, instance)) {
				out = append(out, w)
			}
		}
		return out
	}
	under := func(t int64, instance string) []nemesis.Window { return underWake(t, instance, Wake) }

	// Failpoints and markers, reached and fired.
	for _, op := range h.Ops {
		if op.F != models.FFailpoint || !strings.HasPrefix(op.Proc, models.ProcComponentPrefix) {
			continue
		}
		var ev models.FailpointEvent
		if op.Decode(&ev) != nil || ev.Failpoint == "" {
			continue
		}
		add(CatPoint, "%s", ev.Failpoint)
		if ev.Fired {
			add(CatFired, "%s %s", ev.Failpoint, ev.Action)
		}
		for _, w := range underWake(op.T, "", BranchWake) {
			if slices.Contains(w.Components, ev.Instance) {
				add(CatPointUnder, "%s | %s", ev.Failpoint, w.Kind)
				continue
			}
			for _, p := range processes(w) {
				add(CatPointDuring, "%s | %s@%s", ev.Failpoint, w.Kind, p)
			}
		}
	}

	// Crashes the target did by itself or a failpoint did to it.
	for _, op := range h.Ops {
		if op.Proc == models.ProcNemesis && op.F == "crash" {
			var fr models.FaultRecord
			if op.Decode(&fr) == nil && fr.Target != "" {
				add(CatCrash, "%s", nemesis.Process(fr.Target))
			}
		}
	}

	// Saga moments: transitions, the faults that acted on their actors
	// while they happened, and the moments each fault found sagas at.
	tl := nemesis.NewTimeline(h)
	act := newActors(h)
	touched := map[string]map[string]bool{} // order → kinds of faults that acted on its saga
	touch := func(order, kind string) {
		if touched[order] == nil {
			touched[order] = map[string]bool{}
		}
		touched[order][kind] = true
	}
	for _, o := range tl.Orders() {
		ms := moments(tl.Of(o))
		for i := 1; i < len(ms); i++ {
			tr := ms[i-1].What + "→" + ms[i].What
			add(CatTransition, "%s", tr)
			who := act.of(ms[i-1], ms[i])
			for _, w := range under(ms[i].T, "") {
				for _, p := range processes(w) {
					if p == "*" || who[p] {
						add(CatTransitionUnder, "%s | %s@%s", tr, w.Kind, p)
						touch(o, w.Kind)
					}
				}
			}
		}
	}
	for _, w := range windows {
		procs := processes(w)
		for _, o := range tl.Orders() {
			ms := moments(tl.Of(o))
			for i := 0; i+1 < len(ms); i++ {
				// The saga sat at ms[i] during the window: it reached it
				// before the window ended and left it after the window began.
				if ms[i].T > w.To || ms[i+1].T < w.From {
					continue
				}
				who := act.of(ms[i], ms[i+1])
				for _, p := range procs {
					if p == "*" || who[p] {
						add(CatStep, "%s@%s | %s", w.Kind, p, ms[i].What)
						touch(o, w.Kind)
					}
				}
			}
		}
	}

	// Final trails, and the trails of sagas a fault acted on.
	for _, op := range h.Ops {
		if op.Type != models.State || op.F != models.FOrderState || op.Order == "" {
			continue
		}
		var st models.OrderState
		if op.Decode(&st) != nil || len(st.Trail) == 0 {
			continue
		}
		trail := strings.Join(st.Trail, ",")
		add(CatTrail, "%s", trail)
		for k := range touched[op.Order] {
			add(CatTrailUnder, "%s | %s", trail, k)
		}
	}

	out := make(Signature, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// moments are a saga's milestones without the client's "placed", whose
// time against the first records is a race of the HTTP reply with the
// relay, and without repeats.
func moments(ms []nemesis.Milestone) []nemesis.Milestone {
	var out []nemesis.Milestone
	for _, m := range ms {
		if m.What == "placed" || len(out) > 0 && out[len(out)-1].What == m.What {
			continue
		}
		out = append(out, m)
	}
	return out
}

// actors knows, from the target declaration in the history, which process
// does what: who consumes each record type, who publishes records.
type actors struct {
	consumers map[string][]string // record type → processes
	relays    []string            // processes that publish outbox rows
}

func newActors(h *models.History) actors {
	a := actors{consumers: map[string][]string{}}
	for _, op := range h.Ops {
		if op.Proc != models.ProcHarness || op.F != models.FTarget {
			continue
		}
		var d models.TargetDecl
		if op.Decode(&d) != nil {
			continue
		}
		for _, c := range d.Consumers {
			for _, t := range c.Types {
				if !slices.Contains(a.consumers[t], c.Process) {
					a.consumers[t] = append(a.consumers[t], c.Process)
				}
			}
		}
		for _, r := range d.Relays {
			if p := nemesis.Process(r); !slices.Contains(a.relays, p) {
				a.relays = append(a.relays, p)
			}
		}
	}
	return a
}

// of returns the processes that act in a saga's step from a to b: the
// consumers of a record a, the service that wrote a record b and the
// relays that published it, and for a world effect b the consumer of the
// record before it (who called the world).
func (x actors) of(a, b nemesis.Milestone) map[string]bool {
	out := map[string]bool{}
	if a.Record {
		for _, p := range x.consumers[a.What] {
			out[p] = true
		}
	}
	if b.Record {
		if b.Source != "" {
			out[b.Source] = true
		}
		for _, p := range x.relays {
			out[p] = true
		}
	}
	return out
}

// processes are the processes a window acts on, "*" for a fault on the
// whole system.
func processes(w nemesis.Window) []string {
	if w.Global() {
		return []string{"*"}
	}
	var out []string
	for _, c := range w.Components {
		if p := nemesis.Process(c); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		// A link between two things that are not instances (none today).
		return []string{"?"}
	}
	return out
}

// Coverage is the union of the signatures seen in a campaign, with the
// number of runs that reached each feature.
type Coverage struct {
	hits map[string]int
}

// NewCoverage returns an empty coverage.
func NewCoverage() *Coverage { return &Coverage{hits: map[string]int{}} }

// Add merges a run's signature and returns the features it reached first,
// sorted.
func (c *Coverage) Add(s Signature) []string {
	var fresh []string
	for _, f := range s {
		if c.hits[f] == 0 {
			fresh = append(fresh, f)
		}
		c.hits[f]++
	}
	return fresh
}

// Len is the number of distinct features reached.
func (c *Coverage) Len() int { return len(c.hits) }

// ByCategory counts the distinct features per category.
func (c *Coverage) ByCategory() map[string]int {
	out := map[string]int{}
	for f := range c.hits {
		out[Category(f)]++
	}
	return out
}

// Rare returns the features reached by exactly one run, sorted.
func (c *Coverage) Rare() []string {
	var out []string
	for f, n := range c.hits {
		if n == 1 {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// Hits is how many runs reached feature f.
func (c *Coverage) Hits(f string) int { return c.hits[f] }
