package checkers

import (
	"fmt"
	"slices"
)

// checkNoLostEvent is no-lost-event.
//
// Invariant: every committed outbox row reaches Kafka at least once — some
// event op carries its event_id.
//
// It needs the outbox rows (at least one outbox-snapshot op) and a complete
// kafka-snapshot (every record of the topics was read); without them it is
// unknown. A row the target has not marked published and that is not in the
// log is unknown, not lost: the relay may simply not have reached it yet. A
// row marked published that is absent from a complete log is lost.
func checkNoLostEvent(ix *Index, b *builder) {
	b.stats["rows"] = int64(len(ix.Rows))
	if s := ix.badIn("state:outbox-row", "state:outbox-snapshot", "state:kafka-snapshot", "event"); s != "" {
		b.unknown("%s", s)
	}
	if len(ix.OutboxSnaps) == 0 {
		b.unknown("no outbox snapshot (the target declares no outbox query, or the observer failed)")
		return
	}
	if ix.KafkaSnap == nil {
		b.unknown("no kafka-snapshot: the broker log was not read to the end")
		return
	}
	if !ix.KafkaSnap.Complete {
		b.unknown("kafka-snapshot incomplete: %s", ix.KafkaSnap.Error)
		return
	}
	var found int64
	for n := range ix.Rows {
		r := &ix.Rows[n]
		switch {
		case r.EventID == "":
			b.unknown("outbox row %s#%d has no event_id", r.DB, r.ID)
		case ix.RowInLog(n):
			found++
		case len(ix.KafkaSnap.Topics) > 0 && r.Topic != "" && !slices.Contains(ix.KafkaSnap.Topics, r.Topic):
			b.unknown("outbox row %s#%d is for topic %s, which the observer did not read", r.DB, r.ID, r.Topic)
		case !r.Published:
			b.unknown("outbox row %s#%d (%s) not yet published at observation", r.DB, r.ID, r.Type)
		default:
			b.flag("lost-event", r.Order, fmt.Sprintf("outbox row %s#%d %s (event %s) marked published but not in the complete Kafka log", r.DB, r.ID, r.Type, r.EventID), r.Op, ix.KafkaOp)
		}
	}
	b.stats["rows-in-kafka"] = found
}

// checkNoPhantomEvent is no-phantom-event.
//
// Invariant: every Kafka record's event_id matches a committed outbox row
// (no publish of a change that was rolled back).
//
// A record's database is learnt from the records of its source that do
// match a row (or is the database named like the source). Only when that
// database's outbox snapshot is Complete (no row was deleted) is a missing
// row evidence; otherwise, and for sources with no outbox query, unknown.
func checkNoPhantomEvent(ix *Index, b *builder) {
	b.stats["events"] = int64(len(ix.Events))
	if s := ix.badIn("state:outbox-row", "state:outbox-snapshot", "event"); s != "" {
		b.unknown("%s", s)
	}
	if len(ix.Events) == 0 {
		if ix.KafkaSnap == nil {
			b.unknown("no Kafka log observed (no events and no kafka-snapshot)")
		}
		return
	}
	var matched int64
	for _, e := range ix.Events {
		if e.EventID == "" {
			b.unknown("event #%d has no event_id (%s)", e.Op, e.Malformed)
			continue
		}
		if inMap(ix.RowsByEvent, e.EventID) {
			matched++
			continue
		}
		db, _ := ix.SourceDB(e.Source)
		snap, have := ix.OutboxSnaps[db]
		if db == "" || !have {
			b.unknown("event #%d from source %q: no outbox snapshot of its database", e.Op, e.Source)
			continue
		}
		if !snap.Complete {
			b.unknown("event #%d: outbox snapshot of %s incomplete", e.Op, db)
			continue
		}
		b.flag("phantom-event", e.Order, fmt.Sprintf("%s (event %s, %s/%d@%d) has no committed row in the complete outbox of %s", e.Type, e.EventID, e.Topic, e.Partition, e.Offset, db), e.Op, snap.Op)
	}
	b.stats["events-matched"] = matched
}

func inMap(m map[string]int32, k string) bool {
	_, ok := m[k]
	return ok
}
