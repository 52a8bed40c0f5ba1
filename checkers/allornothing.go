package checkers

import (
	"fmt"
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
// Stock held per order is not observable; conservation checks it in
// aggregate. Orders without a final state are saga-terminates' concern and
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
