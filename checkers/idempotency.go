package checkers

import (
	"fmt"
)

// checkClientIdempotency is client-idempotency.
//
// Invariant: every Idempotency-Key maps to at most one order, counting the
// orders of ok replies for the key and the orders whose final state carries
// the key. Fail and info replies name no order and are not evidence (a
// timed-out request is settled by the final state, never guessed).
func checkClientIdempotency(ix *Index, b *builder) {
	if s := ix.badIn("client", "state:order"); s != "" {
		b.unknown("%s", s)
	}
	var retried int64
	for _, k := range ix.KeyIDs {
		kf := ix.Keys[k]
		if len(kf.Oks) > 1 {
			retried++
		}
		var orders []string
		var ops []int64
		add := func(rs []KeyReply) {
			for _, r := range rs {
				ops = append(ops, r.Op)
				seen := false
				for _, o := range orders {
					seen = seen || o == r.Order
				}
				if !seen {
					orders = append(orders, r.Order)
				}
			}
		}
		add(kf.Oks)
		add(kf.States)
		if len(orders) > 1 {
			b.flag("key-reused", orders[1], fmt.Sprintf("key %s maps to %d orders %v", k, len(orders), capList(orders, 5)), ops...)
		}
	}
	b.stats["keys"] = int64(len(ix.KeyIDs))
	b.stats["keys-answered-twice"] = retried
}

func capList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("…%d more", len(s)-n))
}
