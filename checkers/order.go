package checkers

import (
	"fmt"
	"sort"
)

// checkPerAggregateOrder is per-aggregate-order.
//
// Invariant, from the Kafka log: every record is keyed by its aggregate
// (the contract: key = order id, so one aggregate stays in one partition),
// and per (source, aggregate, topic, partition) the first occurrence of
// each seq appears in increasing seq order by offset. Redelivered or
// re-published duplicates later in the log are legal (k, k+1, k, k+1);
// seq k+1 first seen before k is not. Gaps are legal (the other seqs went
// to other topics).
//
// Invariant, from applied records: per (consumer, aggregate, source), the
// seqs increase with the consumer's position — but only pairs whose records
// are on the same topic are compared, since Kafka orders nothing across
// topics.
//
// Records without a source or seq are skipped (counted in stats).
func checkPerAggregateOrder(ix *Index, b *builder) {
	if s := ix.badIn("event", "state:applied"); s != "" {
		b.unknown("%s", s)
	}
	if ix.KafkaSnap == nil && len(ix.Events) == 0 && len(ix.Applied) == 0 {
		b.unknown("no Kafka log and no applied records observed")
		return
	}
	type part struct {
		topic string
		p     int32
	}
	parts := map[part][]int32{}
	var partOrder []part
	var skipped int64
	for n := range ix.Events {
		e := &ix.Events[n]
		if e.Order != "" && e.Key != e.Order && e.Malformed == "" {
			b.flag("unkeyed", e.Order, fmt.Sprintf("%s of %s published with key %q, not the aggregate id", e.Type, e.Order, e.Key), e.Op)
		}
		if e.Source == "" || e.Seq <= 0 || e.Order == "" {
			skipped++
			continue
		}
		k := part{e.Topic, e.Partition}
		if _, ok := parts[k]; !ok {
			partOrder = append(partOrder, k)
		}
		parts[k] = append(parts[k], int32(n))
	}
	type group struct {
		source, order string
	}
	type gstate struct {
		maxSeq  int64
		maxOp   int64
		flagged bool
	}
	type seen struct {
		g   group
		seq int64
	}
	for _, k := range partOrder {
		evs := parts[k]
		less := func(a, c int) bool { return ix.Events[evs[a]].Offset < ix.Events[evs[c]].Offset }
		if !sort.SliceIsSorted(evs, less) {
			sort.SliceStable(evs, less)
		}
		st := map[group]*gstate{}
		firsts := map[seen]struct{}{}
		for _, n := range evs {
			e := &ix.Events[n]
			g := group{e.Source, e.Order}
			s := st[g]
			if s == nil {
				s = &gstate{}
				st[g] = s
			}
			sk := seen{g, e.Seq}
			if _, dup := firsts[sk]; dup {
				continue // a redelivered or re-published record
			}
			firsts[sk] = struct{}{}
			if e.Seq < s.maxSeq {
				if !s.flagged {
					s.flagged = true
					b.flag("reordered", e.Order, fmt.Sprintf("%s seq %d first appears in %s/%d at offset %d, after seq %d", e.Source, e.Seq, k.topic, k.p, e.Offset, s.maxSeq), s.maxOp, e.Op)
				}
				continue
			}
			s.maxSeq, s.maxOp = e.Seq, e.Op
		}
	}
	// applied records, per consumer
	type agroup struct {
		consumer, order, source string
	}
	groups := map[agroup][]int32{}
	var gorder []agroup
	for n := range ix.Applied {
		a := &ix.Applied[n]
		if a.Seq <= 0 || a.Source == "" || a.Order == "" {
			continue
		}
		g := agroup{a.Consumer, a.Order, a.Source}
		if _, ok := groups[g]; !ok {
			gorder = append(gorder, g)
		}
		groups[g] = append(groups[g], int32(n))
	}
	topicOf := func(eventID string) (string, bool) {
		ns := ix.EventsByID[eventID]
		if len(ns) == 0 {
			return "", false
		}
		return ix.Events[ns[0]].Topic, true
	}
	var appliedChecked int64
	for _, g := range gorder {
		as := groups[g]
		less := func(a, c int) bool { return ix.Applied[as[a]].Position < ix.Applied[as[c]].Position }
		if !sort.SliceIsSorted(as, less) {
			sort.SliceStable(as, less)
		}
		// highest seq applied so far, per topic
		max := map[string]*AppliedFact{}
		for _, n := range as {
			a := &ix.Applied[n]
			topic, ok := topicOf(a.EventID)
			if !ok {
				continue
			}
			appliedChecked++
			if m := max[topic]; m != nil && a.Seq < m.Seq {
				b.flag("applied-out-of-order", g.order, fmt.Sprintf("consumer %s applied %s seq %d (position %d) after seq %d (position %d)", g.consumer, g.source, a.Seq, a.Position, m.Seq, m.Position), m.Op, a.Op)
				continue
			}
			max[topic] = a
		}
	}
	b.stats["events"] = int64(len(ix.Events))
	b.stats["events-skipped"] = skipped
	b.stats["applied-checked"] = appliedChecked
}
