package checkers

import (
	"fmt"
	"slices"

	"github.com/sagachaos/sagachaos/models"
)

// checkAllOrNothing is all-or-nothing.
//
// Invariant, for every order whose final state is terminal and for every
// step i of the spec that declares a world effect, with
// net(i) = (non-replay effects matching step i) − (non-replay effects
// matching step i's compensation effect):
//   - final = spec.Success ⇒ net(i) ≥ 1 (the effect happened and was not
//     undone; "more than one" is no-double-effect's to judge);
//   - final = spec.Failure ⇒ net(i) ≤ 0 (nothing is left done).
//
// From the log, for compensatable steps whose events the spec names:
// final = spec.Failure ⇒ every source that committed the step's event
// committed the compensation's event after it (keptByEvents) — e.g. a
// StockReserved with no later StockReleased is stock kept by a cancelled
// order. Stock quantities per order are not observable; conservation checks
// them in aggregate. Orders without a final state are saga-terminates' concern and
// make this checker unknown.
func checkAllOrNothing(ix *Index, b *builder) {
	spec := ix.Spec
	if s := ix.badIn("effect", "state:order"); s != "" {
		b.unknown("%s", s)
	}
	var checked int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		if o.FinalOp < 0 {
			if len(o.Acks) > 0 {
				b.unknown("order %s has no final state", id)
			}
			continue
		}
		st := o.Final.Status
		success, failure := st == spec.Success, st == spec.Failure
		if !success && !failure {
			continue
		}
		checked++
		if failure {
			keptByEvents(ix, b, o)
		}
		for i, step := range spec.Steps {
			if step.Effect == nil {
				continue
			}
			net := len(o.Fwd[i]) - len(o.Comp[i])
			ev := append(append([]int64{o.FinalOp}, o.Fwd[i]...), o.Comp[i]...)
			switch {
			case success && net < 1:
				b.flag("missing-"+step.Name, id, fmt.Sprintf("order %s but %s has %d effects and %d compensations (net %d, want 1)", st, step.Name, len(o.Fwd[i]), len(o.Comp[i]), net), ev...)
			case failure && net > 0:
				b.flag("kept-"+step.Name, id, fmt.Sprintf("order %s but %s left %d effect(s) not compensated", st, step.Name, net), ev...)
			}
		}
	}
	b.stats["orders"] = checked
}

// keptByEvents is the log half of "failure ⇒ nothing left done": for each
// compensatable step whose event and compensation event the spec names,
// every source that committed the step's event for o must have committed
// the compensation's event after it (a higher seq of the same source) —
// seen in the Kafka log or in an outbox row. Its absence is proof only when
// that source's outbox snapshot is complete; otherwise unknown.
func keptByEvents(ix *Index, b *builder, o *OrderFacts) {
	for _, step := range ix.Spec.Steps {
		if step.Event == "" || step.Compensation == nil || step.Compensation.Event == "" || step.Kind != models.Compensatable {
			continue
		}
		var fwd []seqAt // highest forward seq per source
		for _, en := range o.Events {
			e := &ix.Events[en]
			if e.Type != step.Event || e.Source == "" || e.Seq <= 0 {
				continue
			}
			k := slices.IndexFunc(fwd, func(x seqAt) bool { return x.src == e.Source })
			if k < 0 {
				fwd = append(fwd, seqAt{e.Source, e.Seq, e.Op})
			} else if e.Seq > fwd[k].seq {
				fwd[k].seq, fwd[k].op = e.Seq, e.Op
			}
		}
		for _, f := range fwd {
			done := false
			for _, en := range o.Events {
				e := &ix.Events[en]
				done = done || (e.Type == step.Compensation.Event && e.Source == f.src && e.Seq > f.seq)
			}
			for _, rn := range o.Rows {
				r := &ix.Rows[rn]
				done = done || (r.Type == step.Compensation.Event && r.Seq > f.seq)
			}
			if done {
				continue
			}
			db, ok := ix.SourceDB(f.src)
			snap, have := ix.OutboxSnaps[db]
			if !ok || !have || !snap.Complete {
				b.unknown("order %s ended %s after %s, and no complete outbox of %s shows whether %s followed", o.ID, o.Final.Status, step.Event, f.src, step.Compensation.Event)
				continue
			}
			b.flag("kept-"+step.Name, o.ID, fmt.Sprintf("order %s but %s committed %s (seq %d) and never %s after it", o.Final.Status, f.src, step.Event, f.seq, step.Compensation.Event), f.op, o.FinalOp, snap.Op)
		}
	}
}
