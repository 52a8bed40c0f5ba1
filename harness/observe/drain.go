package observe

import (
	"context"
	"maps"
	"time"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/models"
)

// defaultDrainWait bounds the drain watch.
const defaultDrainWait = 15 * time.Second

// settleTime is how long the outboxes must stay fully published with no new
// row before the observer takes them as the state to check the log against.
const settleTime = 500 * time.Millisecond

// drainWatch is the outbox-drains wait (issue 12 item 2), and the observer's
// first read of the outboxes. It polls every outbox every 100 ms until
//   - every outbox is drained (no unpublished row) and stayed so, with no
//     new row, for settleTime: terminal sagas are not an idle target, a
//     late duplicate command can still make a service write a row;
//   - or every unpublished row is proven stuck: it stayed unpublished
//     through the settle window with its outbox idle (no row published or
//     deleted, and for an outbox published in the log no record of its
//     rows appended) and every relay healthy — a correct relay publishes a
//     row within a few polls, and one working through a backlog changes
//     the outbox (a CDC relay re-streaming from its slot's confirmed
//     position after a crash grows the log with duplicates before it
//     reaches the pending rows). A row added is no relay's progress: an
//     owner re-sending into a relay that publishes nothing must not hide
//     it, and the new row is judged from its own first sighting;
//   - or the bound (DrainWait, at least twice the settle window) passes.
//
// It records one FOutboxDrain op per outbox: what it saw (each pending
// row's first sighting, since when the outbox was idle). It returns, per
// outbox database, the event ids published at the last poll (nil when that
// poll failed: its rows then carry no proof of publication).
func drainWatch(ctx context.Context, rec *models.Recorder, t Target) map[string]map[string]bool {
	settle := t.settle()
	wait := t.DrainWait
	if wait <= 0 {
		wait = defaultDrainWait
	}
	wait = max(wait, 2*settle+time.Second)
	deadline := time.Now().Add(wait)
	type pend struct {
		row   models.PendingRow
		alive bool
	}
	type dbState struct {
		d   models.OutboxDrain
		sig [4]int64 // rows, published, sum of ids, records in the log (log mode)
		// progress is what a relay changes: rows published, rows gone
		// (of the ids ever seen) and records in the log (log mode)
		progress [3]int64
		seen     map[int64]bool
		pending  map[string]*pend
		order    []string
		pub      map[string]bool
		stable   time.Time // since when drained with no new row
	}
	states := make([]*dbState, len(t.Observe.Outbox))
	fromT := historyT(rec)
	for i, q := range t.Observe.Outbox {
		states[i] = &dbState{d: models.OutboxDrain{DB: q.DB, SettleMS: settle.Milliseconds(), FromT: fromT, IdleSinceT: -1}, pending: map[string]*pend{}, seen: map[int64]bool{}}
	}
	var relays []string
	if t.Decl != nil && len(t.Decl.Relays) > 0 {
		relays = t.Decl.Relays
	}
	for {
		done := true
		candidate := true // every pending row has been quiet for the settle window
		anyPending := false
		for i, q := range t.Observe.Outbox {
			s := states[i]
			rows, err := query(ctx, t, q, nil, "id", "event_id", "aggregate_id", "type", "published")
			now := historyT(rec)
			s.d.ToT = now
			if err != nil {
				s.d.Error, s.pub = err.Error(), nil
				done, candidate = false, false
				continue
			}
			s.d.Error = ""
			pub := map[string]bool{}
			var sig [4]int64
			for _, p := range s.pending {
				p.alive = false
			}
			bad := false
			ids := make(map[int64]bool, len(rows))
			for _, r := range rows {
				d := decoder{r: r}
				id, ev, agg, typ, published := d.int("id"), d.str("event_id"), d.str("aggregate_id"), d.str("type"), d.bool("published")
				if d.err != nil {
					s.d.Error, bad = d.err.Error(), true
					break
				}
				sig[0]++
				sig[2] += id
				ids[id] = true
				if logMode(q) {
					// a CDC relay streaming a backlog again after a crash
					// appends duplicates of published rows: the outbox
					// is not idle while the log grows
					sig[3] += d.int(logRecords)
				}
				if published {
					sig[1]++
					pub[ev] = true
					continue
				}
				p := s.pending[ev]
				if p == nil {
					p = &pend{row: models.PendingRow{ID: id, EventID: ev, Aggregate: agg, Type: typ, FirstSeenT: now}}
					s.pending[ev] = p
					s.order = append(s.order, ev)
				}
				p.alive = true
			}
			if bad {
				s.pub = nil
				done, candidate = false, false
				continue
			}
			s.d.Polls++
			s.pub = pub
			var gone int64
			for id := range s.seen {
				if !ids[id] {
					gone++
				}
			}
			maps.Copy(s.seen, ids)
			progress := [3]int64{sig[1], gone, sig[3]}
			if sig != s.sig {
				s.sig, s.stable = sig, time.Now()
			}
			if progress != s.progress || s.d.IdleSinceT < 0 {
				s.progress, s.d.IdleSinceT = progress, now
			}
			live := s.order[:0]
			for _, ev := range s.order {
				if s.pending[ev].alive {
					live = append(live, ev)
				} else {
					delete(s.pending, ev)
				}
			}
			s.order = live
			if len(s.order) > 0 {
				anyPending, done = true, false
				for _, ev := range s.order {
					if now-max(s.pending[ev].row.FirstSeenT, s.d.IdleSinceT) < int64(settle) {
						candidate = false
					}
				}
			} else if time.Since(s.stable) < settleTime {
				done, candidate = false, false
			}
		}
		if !done && anyPending && candidate {
			// every pending row quiet for the settle window: were the
			// relays healthy all that time?
			h := checkers.HealthOf(rec.Ops())
			proven := true
			for _, s := range states {
				for _, ev := range s.order {
					start := max(s.pending[ev].row.FirstSeenT, s.d.IdleSinceT, s.d.FromT, h.HealedT)
					hs, why, _ := h.From(relays, start, s.d.ToT)
					if why != "" || s.d.ToT-hs < int64(settle) {
						proven = false
					}
				}
			}
			done = proven
		}
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	out := map[string]map[string]bool{}
	unpublished := 0
	for _, s := range states {
		s.d.Drained = s.d.Error == "" && len(s.order) == 0
		for _, ev := range s.order {
			s.d.Pending = append(s.d.Pending, s.pending[ev].row)
		}
		if s.d.IdleSinceT < 0 {
			s.d.IdleSinceT = s.d.ToT
		}
		unpublished += len(s.order)
		rec.Record(models.ProcObserver, models.State, models.FOutboxDrain, "", s.d)
		out[s.d.DB] = s.pub
	}
	if unpublished > 0 {
		t.logger().Warn("outbox not drained before observation", "unpublished", unpublished)
	}
	return out
}
