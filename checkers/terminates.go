package checkers

import (
	"fmt"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// checkTerminates is saga-terminates.
//
// Invariant: every accepted order — one returned by an ok place-order, or
// one the observer found in the target's final state — ends in spec.Success
// or spec.Failure once the harness has quiesced, and announces it: the
// spec's terminal event for that status is in the log.
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
//
// Stuck, proved early. When the quiesce stage stopped before its deadline
// (EarlyStop), a pending order is stuck only if the history proves it: the
// spec promises its owner acts on a pending saga within one step timeout,
// visibly (a new outbox row of the aggregate, or a status or trail
// change), so a saga the stage saw unchanged — status, trail and its
// outbox rows — over W = [max(its last change, the watch's start, heal,
// the time since which every component was healthy), the last check] with
// |W| ≥ StuckAfterMS (k step timeouts) is stuck → invalid ("stuck"); else
// unknown. Rows written for it that the stage saw were never published
// (SagaWatch.Unpublished: the Kafka log did not grow for a settle window
// or more, every component healthy) are no action: its owner's re-sends
// reached no one, and its last change is the log's last growth. The same proof also flags, on a wait that ran to its deadline,
// nothing the deadline rule would not.
//
// Terminal event ("missing-terminal-event"): an order whose final status
// is spec.Success (spec.Failure) with spec.SuccessEvent (FailureEvent)
// declared must have a record of that type for it in the complete log. A
// committed outbox row of that type that is not yet in the log is pending
// publication (no-lost-event and outbox-drains judge it): unknown here.
// Neither in the complete log nor in any outbox (every outbox snapshot read
// without error, a row deleted only after publication) → invalid.
func checkTerminates(ix *Index, b *builder) {
	spec := ix.Spec
	if s := ix.badIn("client", "state:order", "state:quiesce", "component", "harness:healed"); s != "" {
		b.unknown("%s", s)
	}
	q := ix.quiesceEvidence()
	pending := map[string]bool{}
	if q != nil && !q.AllTerminal {
		for _, id := range q.Pending {
			pending[id] = true
		}
	}
	early := q != nil && q.EarlyStop
	watched := map[string]*models.SagaWatch{}
	if q != nil {
		for i := range q.Sagas {
			watched[q.Sagas[i].ID] = &q.Sagas[i]
		}
	}
	if ix.OrdersSnap != nil && !ix.OrdersSnap.Complete {
		b.unknown("order list incomplete: %s", ix.OrdersSnap.Error)
	}
	logOK, outboxOK := ix.terminalEvidence()
	var accepted, terminal, proved int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		if len(o.Acks) == 0 && o.FinalOp < 0 {
			continue
		}
		accepted++
		acks := append([]int64{}, o.Acks...)
		// a non-terminal order: proven stuck, early or at the deadline?
		stuck := func(deadlineMsg string, ops ...int64) {
			if w := watched[id]; w != nil {
				if msg, ev, ok := ix.provenStuck(q, w); ok {
					proved++
					b.flag("stuck", id, msg, append(append(acks, ops...), ev...)...)
					return
				} else if early {
					b.unknown("order %s pending when the quiesce stage stopped early, not proven stuck: %s", id, msg)
					return
				}
			} else if early {
				b.unknown("order %s pending when the quiesce stage stopped early, and not watched", id)
				return
			}
			b.flag("stuck", id, deadlineMsg, append(acks, ops...)...)
		}
		switch {
		case o.FinalOp >= 0 && spec.Terminal(o.Final.Status):
			terminal++
			ix.terminalEvent(b, o, logOK, outboxOK)
		case o.FinalOp >= 0:
			stuck(fmt.Sprintf("order ended %s after quiescence, not %s or %s", o.Final.Status, spec.Success, spec.Failure), o.FinalOp, ix.QuiesceOp)
		case pending[id]:
			stuck("acknowledged order still in flight when the quiescence deadline passed", ix.QuiesceOp)
		case ix.OrdersComplete():
			b.flag("lost-order", id, "acknowledged order is missing from the target's complete order list",
				append(acks, ix.OrdersSnap.Op)...)
		default:
			b.unknown("acknowledged order %s has no final state", id)
		}
	}
	b.stats["orders"] = accepted
	b.stats["terminal"] = terminal
	if proved > 0 {
		b.stats["stuck-proved"] = proved
	}
}

// terminalEvidence says whether an absent terminal event can be proven:
// the log was read completely, and every outbox was read without error.
func (ix *Index) terminalEvidence() (logOK, outboxOK string) {
	switch {
	case ix.KafkaSnap == nil:
		logOK = "no kafka-snapshot"
	case !ix.KafkaSnap.Complete:
		logOK = "kafka-snapshot incomplete"
	}
	switch {
	case len(ix.OutboxSnaps) == 0:
		outboxOK = "no outbox snapshot"
	case !ix.observedAll(models.SnapOutboxPfx):
		outboxOK = "not every outbox snapshot was written"
	}
	for db, s := range ix.OutboxSnaps {
		if s.Error != "" {
			outboxOK = "the outbox of " + db + " could not be read"
		}
	}
	return logOK, outboxOK
}

// terminalEvent is the missing-terminal-event rule for one terminal order.
func (ix *Index) terminalEvent(b *builder, o *OrderFacts, logOK, outboxOK string) {
	ev := ix.Spec.TerminalEvent(o.Final.Status)
	if ev == "" {
		return
	}
	for _, en := range o.Events {
		if ix.Events[en].Type == ev {
			return
		}
	}
	for _, rn := range o.Rows {
		if r := &ix.Rows[rn]; r.Type == ev {
			b.unknown("order %s ended %s; its %s is committed (%s#%d) but not yet in the log", o.ID, o.Final.Status, ev, r.DB, r.ID)
			return
		}
	}
	if logOK != "" || outboxOK != "" {
		b.unknown("order %s ended %s and no %s is in the log, but absence is not proven (%s)", o.ID, o.Final.Status, ev, strings.Trim(logOK+"; "+outboxOK, "; "))
		return
	}
	ops := []int64{o.FinalOp, ix.KafkaOp}
	for _, s := range ix.OutboxSnaps {
		ops = append(ops, s.Op)
	}
	b.flag("missing-terminal-event", o.ID, fmt.Sprintf("order ended %s but its terminal event %s is neither in the complete log nor committed in any outbox", o.Final.Status, ev), ops...)
}

// provenStuck decides whether the quiesce stage's observation of w proves
// the saga stuck (see checkTerminates). It returns the violation message,
// or why it is not proven.
func (ix *Index) provenStuck(q *models.Quiesce, w *models.SagaWatch) (string, []int64, bool) {
	if q.StepTimeoutMS <= 0 || q.StuckAfterMS <= 0 {
		return "the spec declares no step timeout", nil, false
	}
	if q.CheckedT <= 0 {
		return "the quiesce stage never checked the sagas' outbox rows", nil, false
	}
	start := max(w.ChangedT, q.FromT, ix.healedT())
	hs, why, ev := ix.healthyFrom(nil, start, q.CheckedT)
	if why != "" {
		return "not every component was healthy: " + why, nil, false
	}
	win := q.CheckedT - hs
	after := q.StuckAfterMS * 1e6
	if win < after {
		return fmt.Sprintf("unchanged for only %s with every component healthy, less than %s (%d step timeouts of %s)",
			dur(max(win, 0)), dur(after), q.StuckAfterMS/q.StepTimeoutMS, dur(q.StepTimeoutMS*1e6)), nil, false
	}
	trail := strings.Join(w.Trail, ",")
	if trail == "" {
		trail = "-"
	}
	msg := fmt.Sprintf("order %s (trail %s) unchanged for %s after heal with every component healthy and no outbox row written for it — %d step timeouts of %s: its owner never acted on it",
		w.Status, trail, dur(win), q.StuckAfterMS/q.StepTimeoutMS, dur(q.StepTimeoutMS*1e6))
	if w.Unpublished {
		msg = fmt.Sprintf("order %s (trail %s) unchanged for %s after heal with every component healthy — %d step timeouts of %s — and the outbox rows written for it since were never published: nothing reached the Kafka log in that window, so its owner's re-sends reached no one (a relay that publishes nothing)",
			w.Status, trail, dur(win), q.StuckAfterMS/q.StepTimeoutMS, dur(q.StepTimeoutMS*1e6))
	}
	return msg, append([]int64{ix.QuiesceOp, ix.HealedOp}, ev...), true
}
