package checkers

import (
	"fmt"
	"slices"

	"github.com/sagachaos/sagachaos/models"
)

// checkNoLostDelivery is no-lost-delivery.
//
// Invariant: for every consumer C the target op declares (its consumer
// name, group, topics and handled types) and every record r of the
// complete Kafka log with r.topic ∈ C.topics, a type C handles (no types
// declared: every type), an event_id and a well-formed envelope: if C's
// group had committed an offset above r.offset on r's partition when the
// observer read the group's offsets (consumer-offsets op), then C's applied
// records hold r.event_id; otherwise r is a lost delivery ("lost-delivery":
// the record, the consumer, the event op, the consumer-offsets op and the
// applied snapshot ops).
//
// Why the committed offset is the proof: the contract says a consumer
// commits a record's offset only after the record's effect and its applied
// record committed, and the observer reads the offsets (after waiting,
// bounded, for every group to catch up) before any applied snapshot, so a
// record below them was processed before the applied records were read.
// Legal, never flagged: a redelivered record (one applied record covers
// every copy); a record of a type C does not handle (skipped without an
// applied record); a record at or above the committed offset (not yet
// processed when observed: not judged, and unknown). The applied
// snapshots must be complete (the target deletes no applied record) and
// read without error, else a missing applied record is not evidence.
//
// Not applicable when the history has no target op (it predates the
// declarations) or the target declares no consumer.
func checkNoLostDelivery(ix *Index, b *builder) {
	if s := ix.badIn("event", "state:applied", "state:applied-snapshot", "state:consumer-offsets", "state:kafka-snapshot", "harness:target"); s != "" {
		b.unknown("%s", s)
	}
	if ix.Target == nil {
		b.notApplicable("the history has no target declaration (it predates it): the consumers are not known")
		return
	}
	if len(ix.Target.Consumers) == 0 {
		b.notApplicable("the target declares no consumer")
		return
	}
	b.stats["consumers"] = int64(len(ix.Target.Consumers))
	switch {
	case ix.KafkaSnap == nil:
		b.unknown("no kafka-snapshot: the log was not read to the end")
		return
	case !ix.KafkaSnap.Complete:
		b.unknown("kafka-snapshot incomplete: %s", ix.KafkaSnap.Error)
		return
	}
	if !ix.observedAll(models.SnapApplied) {
		b.unknown("not every applied snapshot was written (the history is cut): a missing applied record is not evidence")
		return
	}
	if len(ix.AppliedSnaps) == 0 {
		b.unknown("no applied snapshot: what the consumers applied was not observed")
		return
	}
	var snapOps []int64
	for _, s := range ix.AppliedSnaps {
		switch {
		case s.Error != "":
			b.unknown("applied snapshot of %s failed: %s", s.DB, s.Error)
			return
		case !s.Complete:
			b.unknown("applied snapshot of %s is not complete (the target may delete applied records): a missing one is not evidence", s.DB)
			return
		}
		snapOps = append(snapOps, s.Op)
	}
	// The consumers to judge, with their committed offsets per interned
	// partition (-1: nothing committed there).
	type judged struct {
		c     *models.ConsumerDecl
		off   OffsetsFact
		upTo  []int64 // per partition; -2: not a topic of c
		types map[string]bool
		bit   uint64
		first *EventFact
		n     int64
	}
	var js []*judged
	bitOf := map[string]uint64{} // consumer name -> bit
	for i := range ix.Target.Consumers {
		c := &ix.Target.Consumers[i]
		off, ok := ix.Offsets[c.Group]
		if !ok {
			b.unknown("no committed offsets of group %q (consumer %s) observed", c.Group, c.Consumer)
			continue
		}
		if off.Error != "" {
			b.unknown("committed offsets of group %q: %s", c.Group, off.Error)
			continue
		}
		if _, ok := bitOf[c.Consumer]; !ok {
			if len(bitOf) == 64 {
				b.unknown("more than 64 consumers: %s not judged", c.Consumer)
				continue
			}
			bitOf[c.Consumer] = 1 << uint(len(bitOf))
		}
		j := &judged{c: c, off: off, upTo: make([]int64, len(ix.PartNames)), bit: bitOf[c.Consumer]}
		committed := make(map[topicPart]int64, len(off.Partitions))
		for _, p := range off.Partitions {
			committed[topicPart{p.Topic, p.Partition}] = p.Committed
		}
		for k, tp := range ix.PartNames {
			j.upTo[k] = -2
			if slices.Contains(c.Topics, tp.Topic) {
				j.upTo[k] = -1
				if v, ok := committed[tp]; ok {
					j.upTo[k] = v
				}
			}
		}
		if len(c.Types) > 0 {
			j.types = make(map[string]bool, len(c.Types))
			for _, t := range c.Types {
				j.types[t] = true
			}
		}
		js = append(js, j)
	}
	// who applied what: one bit per consumer on the event_id's canonical
	// record (Index.EventsByID); applied records of ids not in the log are
	// never needed
	appliedBy := make([]uint64, len(ix.Events))
	for n := range ix.Applied {
		a := &ix.Applied[n]
		bit, ok := bitOf[a.Consumer]
		if !ok {
			continue
		}
		if en, ok := ix.EventsByID[a.EventID]; ok {
			appliedBy[en] |= bit
		}
	}
	var checked, unjudged int64
	for n := range ix.Events {
		e := &ix.Events[n]
		if e.EventID == "" || e.Malformed != "" {
			continue
		}
		canon := int32(-1)
		for _, j := range js {
			up := j.upTo[e.part]
			if up == -2 || (j.types != nil && !j.types[e.Type]) {
				continue
			}
			if e.Offset >= up {
				j.n++
				if j.first == nil {
					j.first = e
				}
				continue
			}
			checked++
			if canon < 0 {
				canon = ix.EventsByID[e.EventID]
			}
			if appliedBy[canon]&j.bit != 0 {
				continue
			}
			b.flag("lost-delivery", e.Order, fmt.Sprintf("record %s/%d@%d %s (event %s) is below group %s's committed offset %d, but consumer %s never applied it",
				e.Topic, e.Partition, e.Offset, e.Type, e.EventID, j.c.Group, up, j.c.Consumer), append([]int64{e.Op, j.off.Op}, snapOps...)...)
		}
	}
	for _, j := range js {
		if j.n > 0 {
			unjudged += j.n
			e := j.first
			b.unknown("group %s had not committed past %d record(s) it consumes when observed (first %s/%d@%d, committed %d): not yet processed, not judged",
				j.c.Group, j.n, e.Topic, e.Partition, e.Offset, j.upTo[e.part])
		}
	}
	b.stats["records-checked"] = checked
	b.stats["records-unjudged"] = unjudged
}
