package checkers

import (
	"fmt"
)

// checkNoDoubleEffect is no-double-effect.
//
// Invariant: for each order and each world effect the spec declares (a
// step's effect or its compensation's), at most one non-replay effect op
// matches. Replays (answered from an idempotency store) are not effects;
// effects the spec's Match excludes (a declined charge, a cancellation
// e-mail) are not counted.
func checkNoDoubleEffect(ix *Index, b *builder) {
	if s := ix.badIn("effect"); s != "" {
		b.unknown("%s", s)
	}
	var replays int64
	for _, e := range ix.Effects {
		if e.Replay {
			replays++
		}
	}
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		for i, step := range ix.Spec.Steps {
			if n := len(o.Fwd[i]); n > 1 {
				b.flag("double-"+step.Name, id, fmt.Sprintf("%d %s effects, want at most 1", n, step.Name), o.Fwd[i]...)
			}
			if n := len(o.Comp[i]); n > 1 {
				b.flag("double-"+step.Compensation.Name, id, fmt.Sprintf("%d %s effects, want at most 1", n, step.Compensation.Name), o.Comp[i]...)
			}
		}
	}
	b.stats["effects"] = int64(len(ix.Effects))
	b.stats["replays"] = replays
	if ix.EffectsWithoutOrder > 0 {
		b.stats["effects-without-order"] = int64(ix.EffectsWithoutOrder)
	}
}
