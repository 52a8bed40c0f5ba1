package checkers

import (
	"fmt"
)

// checkTerminates is saga-terminates.
//
// Invariant: every accepted order — one returned by an ok place-order, or
// one the observer found in the target's final state — ends in spec.Success
// or spec.Failure once the harness has quiesced.
//
// Evidence and verdicts:
//   - a final order-state whose status is not terminal → invalid ("stuck");
//   - an acknowledged order with no final state that the quiesce op lists
//     as pending (AllTerminal=false) → invalid ("stuck");
//   - an acknowledged order absent from a complete orders-snapshot (the
//     observer listed every order the target knows) → invalid ("lost-order");
//   - an acknowledged order with no final state otherwise → unknown: the
//     history lacks the observation (an incomplete orders-snapshot says why);
//   - an info (unknown outcome) place-order whose order never shows up in
//     the final state proves nothing: the request may never have arrived.
func checkTerminates(ix *Index, b *builder) {
	spec := ix.Spec
	if s := ix.badIn("client", "state:order", "state:quiesce"); s != "" {
		b.unknown("%s", s)
	}
	pending := map[string]bool{}
	if q := ix.quiesceEvidence(); q != nil && !q.AllTerminal {
		for _, id := range q.Pending {
			pending[id] = true
		}
	}
	if ix.OrdersSnap != nil && !ix.OrdersSnap.Complete {
		b.unknown("order list incomplete: %s", ix.OrdersSnap.Error)
	}
	var accepted, terminal int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		if len(o.Acks) == 0 && o.FinalOp < 0 {
			continue
		}
		accepted++
		switch {
		case o.FinalOp >= 0 && spec.Terminal(o.Final.Status):
			terminal++
		case o.FinalOp >= 0:
			b.flag("stuck", id, fmt.Sprintf("order ended %s after quiescence, not %s or %s", o.Final.Status, spec.Success, spec.Failure),
				append(append([]int64{}, o.Acks...), o.FinalOp, ix.QuiesceOp)...)
		case pending[id]:
			b.flag("stuck", id, "acknowledged order still in flight when the quiescence deadline passed",
				append(append([]int64{}, o.Acks...), ix.QuiesceOp)...)
		case ix.OrdersComplete():
			b.flag("lost-order", id, "acknowledged order is missing from the target's complete order list",
				append(append([]int64{}, o.Acks...), ix.OrdersSnap.Op)...)
		default:
			b.unknown("acknowledged order %s has no final state", id)
		}
	}
	b.stats["orders"] = accepted
	b.stats["terminal"] = terminal
}
