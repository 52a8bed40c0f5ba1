package nemesis

import (
	"fmt"
	"slices"
	"sync"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Events counts what happens in a run for the faults' event triggers
// (scenarios.Trigger): world effects and failpoint or marker lines as the
// recorder records them (Observe, subscribed to the recorder), and broker
// records as a tail of the target's topics reads them (ObserveRecord).
// Every event is kept (compactly), so a trigger registered late still
// counts from the start of the run.
type Events struct {
	// consumes is what each process consumes: topics (as named in the
	// broker) and types.
	consumes map[string][]models.ConsumerDecl
	// process maps an instance to its process.
	process map[string]string

	mu    sync.Mutex
	seen  []event
	waits []*eventWait
}

type event struct {
	on string // scenarios.TriggerEffect, TriggerFailpoint, TriggerRecord
	// effect
	proc, f string
	fields  map[string]string
	// failpoint
	point, instance string
	// record
	topic, typ string
	// where: "op 1234", "orders/2@17"
	where string
}

type eventWait struct {
	t     scenarios.Trigger
	count int
	ch    chan string
}

// NewEvents returns an event counter for a target whose processes consume
// what consumers says (topics as named in the broker) and whose instances
// belong to the processes instances says (instance → process).
func NewEvents(consumers []models.ConsumerDecl, instances map[string]string) *Events {
	e := &Events{consumes: map[string][]models.ConsumerDecl{}, process: instances}
	for _, c := range consumers {
		e.consumes[c.Process] = append(e.consumes[c.Process], c)
	}
	return e
}

// Observe counts one op of the history; subscribe it to the recorder.
func (e *Events) Observe(op models.Op) {
	var ev event
	switch {
	case op.Type == models.Effect:
		var v map[string]any
		if op.Decode(&v) != nil {
			return
		}
		if r, _ := v["replay"].(bool); r {
			return // a replay moved nothing in the world
		}
		ev = event{on: scenarios.TriggerEffect, proc: op.Proc, f: op.F, fields: map[string]string{}}
		for k, x := range v {
			if s, ok := x.(string); ok {
				ev.fields[k] = s
			}
		}
	case op.F == models.FFailpoint && len(op.Proc) > len(models.ProcComponentPrefix) && op.Proc[:len(models.ProcComponentPrefix)] == models.ProcComponentPrefix:
		var fe models.FailpointEvent
		if op.Decode(&fe) != nil || fe.Failpoint == "" {
			return
		}
		ev = event{on: scenarios.TriggerFailpoint, point: fe.Failpoint, instance: fe.Instance}
	default:
		return
	}
	ev.where = fmt.Sprintf("op %d", op.I)
	e.add(ev)
}

// ObserveRecord counts one record of the broker's log.
func (e *Events) ObserveRecord(topic, typ string, partition int32, offset int64) {
	if typ == "" {
		return
	}
	e.add(event{on: scenarios.TriggerRecord, topic: topic, typ: typ, where: fmt.Sprintf("%s/%d@%d", topic, partition, offset)})
}

func (e *Events) add(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, ev)
	kept := e.waits[:0]
	for _, w := range e.waits {
		if e.matches(w.t, ev) {
			w.count++
			if w.count >= w.t.Count {
				w.ch <- describe(w.t, ev)
				continue
			}
		}
		kept = append(kept, w)
	}
	e.waits = kept
}

// Wait returns a channel that receives one line describing the event that
// satisfied t (the t.Count-th match), at once if it already happened.
func (e *Events) Wait(t scenarios.Trigger) <-chan string {
	ch := make(chan string, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	w := &eventWait{t: t, ch: ch}
	for _, ev := range e.seen {
		if e.matches(t, ev) {
			w.count++
			if w.count >= t.Count {
				ch <- describe(t, ev)
				return ch
			}
		}
	}
	e.waits = append(e.waits, w)
	return ch
}

// Counts reports how many events so far match t (for the journal of a
// trigger that never fired).
func (e *Events) Counts(t scenarios.Trigger) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.seen {
		if e.matches(t, ev) {
			n++
		}
	}
	return n
}

func describe(t scenarios.Trigger, ev event) string {
	return fmt.Sprintf("%s at %s", t.String(), ev.where)
}

// matches reports whether ev is an event t counts. Caller holds e.mu.
func (e *Events) matches(t scenarios.Trigger, ev event) bool {
	if ev.on != t.On {
		return false
	}
	switch t.On {
	case scenarios.TriggerEffect:
		if ev.proc != t.Proc || ev.f != t.F {
			return false
		}
		for k, v := range t.Match {
			if ev.fields[k] != v {
				return false
			}
		}
		return true
	case scenarios.TriggerFailpoint:
		if ev.point != t.Point {
			return false
		}
		return t.Component == "" || ev.instance == t.Component || e.process[ev.instance] == t.Component
	case scenarios.TriggerRecord:
		if ev.typ != t.Type {
			return false
		}
		if t.Component == "" {
			return true
		}
		for _, c := range e.consumes[t.Component] {
			if slices.Contains(c.Topics, ev.topic) && (len(c.Types) == 0 || slices.Contains(c.Types, ev.typ)) {
				return true
			}
		}
		return false
	}
	return false
}
