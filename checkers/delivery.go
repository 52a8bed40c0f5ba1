package checkers

import (
	"fmt"
	"slices"
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
	// applied event ids per consumer name
	applied := map[string]map[string]struct{}{}
	for _, a := range ix.Applied {
		m := applied[a.Consumer]
		if m == nil {
			m = map[string]struct{}{}
			applied[a.Consumer] = m
		}
		m[a.EventID] = struct{}{}
	}
	var checked, unjudged int64
	for _, c := range ix.Target.Consumers {
		off, ok := ix.Offsets[c.Group]
		if !ok {
			b.unknown("no committed offsets of group %q (consumer %s) observed", c.Group, c.Consumer)
			continue
		}
		if off.Error != "" {
			b.unknown("committed offsets of group %q: %s", c.Group, off.Error)
			continue
		}
		committed := make(map[topicPart]int64, len(off.Partitions))
		for _, p := range off.Partitions {
			committed[topicPart{p.Topic, p.Partition}] = p.Committed
		}
		// per interned partition: consumed by c, and its committed offset
		consumes := make([]bool, len(ix.PartNames))
		upTo := make([]int64, len(ix.PartNames))
		for i, tp := range ix.PartNames {
			if slices.Contains(c.Topics, tp.Topic) {
				consumes[i] = true
				if v, ok := committed[tp]; ok {
					upTo[i] = v
				} else {
					upTo[i] = -1
				}
			}
		}
		var types map[string]bool
		if len(c.Types) > 0 {
			types = make(map[string]bool, len(c.Types))
			for _, t := range c.Types {
				types[t] = true
			}
		}
		got := applied[c.Consumer]
		var firstUnjudged *EventFact
		var cUnjudged int64
		for n := range ix.Events {
			e := &ix.Events[n]
			if !consumes[e.part] || (types != nil && !types[e.Type]) || e.EventID == "" || e.Malformed != "" {
				continue
			}
			if e.Offset >= upTo[e.part] {
				cUnjudged++
				if firstUnjudged == nil {
					firstUnjudged = e
				}
				continue
			}
			checked++
			if _, ok := got[e.EventID]; ok {
				continue
			}
			b.flag("lost-delivery", e.Order, fmt.Sprintf("record %s/%d@%d %s (event %s) is below group %s's committed offset %d, but consumer %s never applied it",
				e.Topic, e.Partition, e.Offset, e.Type, e.EventID, c.Group, upTo[e.part], c.Consumer), append([]int64{e.Op, off.Op}, snapOps...)...)
		}
		if cUnjudged > 0 {
			unjudged += cUnjudged
			e := firstUnjudged
			b.unknown("group %s had not committed past %d record(s) it consumes when observed (first %s/%d@%d, committed %d): not yet processed, not judged",
				c.Group, cUnjudged, e.Topic, e.Partition, e.Offset, upTo[e.part])
		}
	}
	b.stats["records-checked"] = checked
	b.stats["records-unjudged"] = unjudged
}
