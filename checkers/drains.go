package checkers

import (
	"fmt"
	"slices"
	"strings"
)

// checkOutboxDrains is outbox-drains, the outbox's liveness promise.
//
// Invariant: after heal, no committed row stays unpublished through a
// settle window in which every relay was healthy and its outbox idle.
// Precisely, for every row the drain watch of its database (outbox-drain
// op: the observer polled the outbox after heal and quiesce until it
// drained, every unpublished row was proven stuck, or a bound) saw
// unpublished at its last poll, and whose event_id is not in the complete
// Kafka log: with W = [max(first poll that saw it unpublished, the poll
// since which the outbox did not change, heal, the time since which every
// relay was healthy), last poll], |W| ≥ the settle window ⇒ violation
// "stuck-row" ("stuck in the outbox … with every relay healthy").
//
// The outbox being idle is part of the proof: a relay working through a
// backlog publishes other rows and changes the outbox, and a row behind
// the backlog is not stuck. Idle is no row published or deleted (nor, for
// an outbox published in the log, a record of its rows appended): a row
// added is no relay's progress, so an owner re-sending into a relay that
// publishes nothing does not hide it. A row whose record is in the log was
// delivered (its mark lags) and is never flagged. The relays are the
// target op's; without it, every component must be healthy. Unknown when
// the window is shorter than the settle window (saying which relay was
// unhealthy, or that the outbox kept changing), when the drain watch failed,
// or when the log is incomplete. Not applicable when the history has no
// drain watch and no observe plan (it predates them), or the target
// declares no outbox.
func checkOutboxDrains(ix *Index, b *builder) {
	if s := ix.badIn("state:outbox-drain", "state:outbox-row", "state:outbox-snapshot", "state:kafka-snapshot", "event", "harness:healed", "harness:target", "component"); s != "" {
		b.unknown("%s", s)
	}
	if len(ix.Drains) == 0 {
		switch {
		case ix.Plan == nil:
			b.notApplicable("the history has no drain watch (it predates it)")
		case len(ix.OutboxSnaps) == 0:
			b.notApplicable("the target declares no outbox")
		default:
			b.unknown("no drain watch recorded for any outbox")
		}
		return
	}
	switch {
	case ix.KafkaSnap == nil:
		b.unknown("no kafka-snapshot: whether a pending row was delivered is not known")
		return
	case !ix.KafkaSnap.Complete:
		b.unknown("kafka-snapshot incomplete: %s", ix.KafkaSnap.Error)
		return
	}
	var relays []string
	who := "every component"
	if ix.Target != nil && len(ix.Target.Relays) > 0 {
		relays = ix.Target.Relays
		who = "every relay (" + strings.Join(relays, ", ") + ")"
	}
	dbs := make([]string, 0, len(ix.Drains))
	for db := range ix.Drains {
		dbs = append(dbs, db)
	}
	slices.Sort(dbs)
	for db := range ix.OutboxSnaps {
		if _, ok := ix.Drains[db]; !ok {
			b.unknown("no drain watch of outbox %s", db)
		}
	}
	var pending, delivered int64
	for _, db := range dbs {
		d := ix.Drains[db]
		if d.Error != "" {
			b.unknown("drain watch of %s failed: %s", db, d.Error)
			continue
		}
		settle := d.SettleMS * 1e6
		for _, p := range d.Pending {
			pending++
			if _, ok := ix.EventsByID[p.EventID]; ok {
				delivered++
				continue
			}
			start := max(p.FirstSeenT, d.IdleSinceT, d.FromT, ix.healedT())
			hs, why, ev := ix.healthyFrom(relays, start, d.ToT)
			order, rowOp, typ := p.Aggregate, int64(-1), p.Type
			if n, ok := ix.RowsByEvent[p.EventID]; ok {
				r := &ix.Rows[n]
				rowOp, order, typ = r.Op, r.Order, r.Type
			}
			if why != "" {
				b.unknown("outbox row %s#%d (%s) unpublished at the last poll, but not with %s healthy: %s", db, p.ID, typ, who, why)
				continue
			}
			w := d.ToT - hs
			if settle <= 0 || w < settle {
				reason := "the outbox kept changing"
				if hs > start {
					reason = "a relay became healthy late"
				} else if p.FirstSeenT >= d.IdleSinceT {
					reason = "it was first seen late"
				}
				b.unknown("outbox row %s#%d (%s) unpublished at the last poll, but only %s of the settle window %s passed with %s healthy and the outbox idle (%s)",
					db, p.ID, typ, dur(max(w, 0)), dur(settle), who, reason)
				continue
			}
			ops := append([]int64{d.Op, rowOp, ix.HealedOp, ix.KafkaOp}, ev...)
			b.flag("stuck-row", order, fmt.Sprintf("outbox row %s#%d %s (event %s) stuck in the outbox: unpublished for %s since first seen, the last %s with %s healthy and the outbox idle (settle window %s), and not in the log",
				db, p.ID, typ, p.EventID, dur(d.ToT-p.FirstSeenT), dur(w), who, dur(settle)), ops...)
		}
	}
	b.stats["outboxes"] = int64(len(dbs))
	b.stats["rows-pending"] = pending
	b.stats["rows-pending-delivered"] = delivered
}
