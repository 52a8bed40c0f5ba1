package checkers

import (
	"fmt"
)

// checkPivot is pivot.
//
// Invariant, per order, for the spec's pivot step p (none: valid):
//   - no compensation effect of p is recorded after a successful effect of
//     p ("pivot-compensated": after the point of no return the saga only
//     goes forward);
//   - no effect of a step after p is recorded before the first effect of p
//     ("before-pivot": e.g. the confirmation e-mail before the charge);
//     world effect indices are real-time order;
//   - an order whose pivot effect stands (net of compensations > 0) does
//     not end in spec.Failure ("pivot-not-approved").
func checkPivot(ix *Index, b *builder) {
	spec := ix.Spec
	p := spec.PivotIndex()
	if p < 0 {
		b.stats["pivot"] = 0
		return
	}
	if s := ix.badIn("effect", "state:order"); s != "" {
		b.unknown("%s", s)
	}
	pstep := spec.Steps[p]
	var pivoted int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		f := first(o.Fwd[p])
		if f < 0 {
			continue
		}
		pivoted++
		for _, c := range o.Comp[p] {
			if c > f {
				b.flag("pivot-compensated", id, fmt.Sprintf("%s after the pivot %s", pstep.Compensation.Name, pstep.Name), f, c)
				break
			}
		}
		for j := p + 1; j < len(spec.Steps); j++ {
			if fj := first(o.Fwd[j]); fj >= 0 && fj < f {
				b.flag("before-pivot", id, fmt.Sprintf("%s happened before the pivot %s", spec.Steps[j].Name, pstep.Name), fj, f)
			}
		}
		if o.FinalOp < 0 {
			b.unknown("order %s passed the pivot but has no final state", id)
		}
		if o.FinalOp >= 0 && o.Final.Status == spec.Failure && len(o.Fwd[p]) > len(o.Comp[p]) {
			b.flag("pivot-not-approved", id, fmt.Sprintf("%s succeeded but the order ended %s", pstep.Name, o.Final.Status), f, o.FinalOp)
		}
	}
	b.stats["orders-pivoted"] = pivoted
}
