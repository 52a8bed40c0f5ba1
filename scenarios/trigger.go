package scenarios

import (
	"fmt"
	"sort"
	"strings"
)

// Trigger kinds: what a planned fault waits for before it starts. Every one
// counts events of the run's history (or the broker's log), never wall
// time, so a replay lands its faults at the same saga moments.
const (
	// TriggerOrders: Count orders have been invoked (the workload
	// position). A fault without a trigger waits for AfterOrders orders.
	TriggerOrders = "orders"
	// TriggerEffect: a world provider (Proc, "world/gateway") has recorded
	// its Count-th effect of action F (replays not counted) whose value
	// has every Match field ({"status": "declined"}). Effects are recorded
	// as they happen: the trigger fires within microseconds.
	TriggerEffect = "effect"
	// TriggerFailpoint: a component (Component: an instance, or a process
	// and all its instances; empty: any) has logged its Count-th line for
	// failpoint or marker Point — a point reached for the first time in a
	// process's life, an armed action firing, or a marker's branch taken
	// (thinned by the component to a line per interval). The harness tails
	// the failpoint log every 50 ms, so the trigger fires up to ~50 ms
	// after the component got there.
	TriggerFailpoint = "failpoint"
	// TriggerRecord: the broker's log holds the Count-th record of Type on
	// a topic that process Component consumes (manifest consumes): the
	// command or reply is on its way to Component; without a Component, on
	// any of the target's topics (an event nobody consumes). The harness
	// tails the
	// topics directly, so the trigger fires ~10–50 ms after the produce,
	// usually before the consumer has handled the record.
	TriggerRecord = "record"
)

// TriggerKinds lists the trigger kinds.
var TriggerKinds = []string{TriggerOrders, TriggerEffect, TriggerFailpoint, TriggerRecord}

// Trigger says when a fault starts: at an event of the run, counted.
type Trigger struct {
	On string `json:"on"`
	// Count: the Count-th matching event (from 1); for orders the number
	// of orders invoked (from 0).
	Count int `json:"count"`
	// Proc, F and Match select world effects (TriggerEffect).
	Proc  string            `json:"proc,omitempty"`
	F     string            `json:"f,omitempty"`
	Match map[string]string `json:"match,omitempty"`
	// Point is the failpoint or marker (TriggerFailpoint).
	Point string `json:"point,omitempty"`
	// Component is the instance or process a failpoint line comes from
	// (TriggerFailpoint), or the consuming process (TriggerRecord).
	Component string `json:"component,omitempty"`
	// Type is the record type (TriggerRecord).
	Type string `json:"type,omitempty"`
	// Delay is how long after the event the fault starts.
	Delay Duration `json:"delay,omitempty"`
	// Fallback, when set, starts the fault once this many orders have been
	// invoked if its event has not come by then (a moment the target never
	// reaches still gets its fault, late in the run, and the journal says
	// it fell back).
	Fallback int `json:"fallback,omitempty"`
}

// Validate reports the first bad field.
func (t *Trigger) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("trigger: field %s: %s", field, fmt.Sprintf(format, a...))
	}
	switch t.On {
	case TriggerOrders:
		if t.Count < 0 {
			return bad("count", "%d is negative", t.Count)
		}
		return nil
	case TriggerEffect:
		if t.Proc == "" || t.F == "" {
			return bad("proc", "an effect trigger names the provider (proc) and the action (f)")
		}
	case TriggerFailpoint:
		if t.Point == "" {
			return bad("point", "a failpoint trigger names the failpoint or marker")
		}
	case TriggerRecord:
		if t.Type == "" {
			return bad("type", "a record trigger names the record type")
		}
	default:
		return bad("on", "unknown trigger %q (known: %s)", t.On, strings.Join(TriggerKinds, ", "))
	}
	if t.Count < 1 {
		return bad("count", "%d is below 1", t.Count)
	}
	if t.Delay < 0 {
		return bad("delay", "negative")
	}
	if t.Fallback < 0 {
		return bad("fallback", "%d is negative", t.Fallback)
	}
	return nil
}

// String describes the trigger in a few words ("the 3rd charge effect of
// world/gateway {status=declined}").
func (t *Trigger) String() string {
	var s string
	switch t.On {
	case TriggerOrders:
		s = fmt.Sprintf("%d orders invoked", t.Count)
	case TriggerEffect:
		s = fmt.Sprintf("%s %s effect #%d", t.Proc, t.F, t.Count)
		if len(t.Match) > 0 {
			keys := make([]string, 0, len(t.Match))
			for k := range t.Match {
				keys = append(keys, k+"="+t.Match[k])
			}
			sort.Strings(keys)
			s += " {" + strings.Join(keys, ",") + "}"
		}
	case TriggerFailpoint:
		s = fmt.Sprintf("%s line #%d", t.Point, t.Count)
		if t.Component != "" {
			s += " on " + t.Component
		}
	case TriggerRecord:
		s = fmt.Sprintf("%s record #%d", t.Type, t.Count)
		if t.Component != "" {
			s += " for " + t.Component
		}
	default:
		s = t.On
	}
	if t.Delay > 0 {
		s += fmt.Sprintf(" +%v", t.Delay.D())
	}
	return s
}

// When is the trigger of f: its own, or the order count of AfterOrders.
func (f Fault) When() Trigger {
	if f.Trigger != nil {
		return *f.Trigger
	}
	return Trigger{On: TriggerOrders, Count: f.AfterOrders}
}
