package checkers

import (
	"fmt"
)

// checkCompensationOrder is compensation-order.
//
// Two clocks are sound, and only those are used:
//   - world effects are recorded by the world service when applied, under
//     the recorder's lock, so their history indices are real-time order;
//   - the envelope seq is assigned in the outbox transaction per (source,
//     aggregate), so seqs of one source are that service's commit order.
//
// Broker offsets of different topics, and event op indices (the observer
// reads the log after quiescence), are not a clock and are never compared.
//
// Invariant, per order, for steps i < j of the spec:
//   - null compensation: a compensation effect of step i with no effect of
//     step i anywhere in the world → invalid;
//   - hanging: the first effect of step i recorded after the first
//     compensation effect of step i; or, for a source publishing both the
//     step's event and its compensation's event, the first forward event's
//     seq above the first compensation event's seq (the forward action was
//     committed after its compensation) → invalid;
//   - reverse order: step j's effect existed (lower index / lower seq of the
//     same source) when step i was compensated, and step i's compensation
//     came before step j's → invalid.
//
// A compensation event without any forward event is NOT flagged: a correct
// service may acknowledge a compensation for a step that never ran (the
// null-compensation tombstone), and the log cannot tell an acknowledgement
// from an undo. The world can, so null compensation is judged on effects.
func checkCompensationOrder(ix *Index, b *builder) {
	spec := ix.Spec
	if s := ix.badIn("effect", "event"); s != "" {
		b.unknown("%s", s)
	}
	n := len(spec.Steps)
	// per order scratch: the first seq per step and source of forward and
	// compensation events (few sources: a slice beats a map)
	fwdSeq := make([][]seqAt, n)
	compSeq := make([][]seqAt, n)
	var compensated int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		any := false
		// world effects
		for i, step := range spec.Steps {
			c := first(o.Comp[i])
			if c < 0 {
				continue
			}
			any = true
			f := first(o.Fwd[i])
			switch {
			case step.Effect != nil && f < 0:
				b.flag("null-compensation", id, fmt.Sprintf("%s happened but %s never did", step.Compensation.Name, step.Name), c)
			case f > c:
				b.flag("hanging", id, fmt.Sprintf("%s happened after its compensation %s", step.Name, step.Compensation.Name), c, f)
			}
			for j := i + 1; j < n; j++ {
				cj, fj := first(o.Comp[j]), first(o.Fwd[j])
				if cj > c && fj >= 0 && fj < c {
					b.flag("reverse-order", id, fmt.Sprintf("%s compensated before %s, which had happened", spec.Steps[i].Name, spec.Steps[j].Name), fj, c, cj)
				}
			}
		}
		// events of one source
		if len(o.Events) > 0 {
			for i := range fwdSeq {
				fwdSeq[i], compSeq[i] = fwdSeq[i][:0], compSeq[i][:0]
			}
			for _, en := range o.Events {
				e := &ix.Events[en]
				if e.Source == "" || e.Seq <= 0 || e.Malformed != "" {
					continue
				}
				if i, ok := ix.fwdEvent[e.Type]; ok {
					fwdSeq[i] = putSeq(fwdSeq[i], e)
				}
				if i, ok := ix.compEvent[e.Type]; ok {
					compSeq[i] = putSeq(compSeq[i], e)
				}
			}
			for i, step := range spec.Steps {
				for _, c := range compSeq[i] {
					any = true
					src := c.src
					if f, ok := findSeq(fwdSeq[i], src); ok && f.seq > c.seq {
						b.flag("hanging", id, fmt.Sprintf("%s committed %s (seq %d) after %s (seq %d)", src, step.Event, f.seq, step.Compensation.Event, c.seq), c.op, f.op)
					}
					for j := i + 1; j < n; j++ {
						cj, okc := findSeq(compSeq[j], src)
						fj, okf := findSeq(fwdSeq[j], src)
						if okc && okf && fj.seq < c.seq && c.seq < cj.seq {
							b.flag("reverse-order", id, fmt.Sprintf("%s compensated %s before %s", src, spec.Steps[i].Name, spec.Steps[j].Name), fj.op, c.op, cj.op)
						}
					}
				}
			}
		}
		if any {
			compensated++
		}
	}
	b.stats["orders-compensated"] = compensated
}

// seqAt is the first seq of one source's events of one kind, and its op.
type seqAt struct {
	src string
	seq int64
	op  int64
}

func putSeq(s []seqAt, e *EventFact) []seqAt {
	for i := range s {
		if s[i].src == e.Source {
			if e.Seq < s[i].seq {
				s[i].seq, s[i].op = e.Seq, e.Op
			}
			return s
		}
	}
	return append(s, seqAt{e.Source, e.Seq, e.Op})
}

func findSeq(s []seqAt, src string) (seqAt, bool) {
	for _, x := range s {
		if x.src == src {
			return x, true
		}
	}
	return seqAt{}, false
}
