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
// sit in the same partition (found through the Kafka log by event_id) are
// compared, since Kafka orders nothing across partitions; an aggregate split
// over partitions is already flagged as unkeyed.
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
	switch {
	case ix.KafkaSnap == nil:
		b.unknown("no kafka-snapshot: the log may have been read only in part")
	case !ix.KafkaSnap.Complete:
		b.unknown("kafka-snapshot incomplete: %s", ix.KafkaSnap.Error)
	}
	// Kafka log: events per partition, in offset order
	byPart := make([][]int32, len(ix.PartNames))
	var skipped int64
	for n := range ix.Events {
		e := &ix.Events[n]
		if e.Order != "" && e.Key != e.Order && e.Malformed == "" {
			b.flag("unkeyed", e.Order, fmt.Sprintf("%s of %s published with key %q, not the aggregate id", e.Type, e.Order, e.Key), e.Op)
		}
		if e.Source == "" || e.Seq <= 0 || e.ord < 0 {
			skipped++
			continue
		}
		byPart[e.part] = append(byPart[e.part], int32(n))
	}
	// per (source, order, partition): the seqs first seen so far, as a
	// chain through one arena (no allocation per group)
	type gstate struct {
		maxSeq, maxOp int64
		head          int32 // last arena entry, -1 none
		flagged       bool
	}
	var states []gstate
	var arenaSeq []int64
	var arenaPrev []int32
	gid := make(map[[3]int32]int32, len(ix.Events)/4+1)
	for p, evs := range byPart {
		less := func(a, c int) bool { return ix.Events[evs[a]].Offset < ix.Events[evs[c]].Offset }
		if !sort.SliceIsSorted(evs, less) {
			sort.SliceStable(evs, less)
		}
		for _, n := range evs {
			e := &ix.Events[n]
			k := [3]int32{e.src, e.ord, int32(p)}
			g, ok := gid[k]
			if !ok {
				g = int32(len(states))
				gid[k] = g
				states = append(states, gstate{head: -1})
			}
			s := &states[g]
			if e.Seq <= s.maxSeq {
				seen := false
				for a := s.head; a >= 0 && !seen; a = arenaPrev[a] {
					seen = arenaSeq[a] == e.Seq
				}
				if seen {
					continue // a redelivered or re-published record
				}
				if !s.flagged {
					s.flagged = true
					tp := ix.PartNames[p]
					b.flag("reordered", e.Order, fmt.Sprintf("%s seq %d first appears in %s/%d at offset %d, after seq %d", e.Source, e.Seq, tp.Topic, tp.Partition, e.Offset, s.maxSeq), s.maxOp, e.Op)
				}
				continue
			}
			s.maxSeq, s.maxOp = e.Seq, e.Op
			arenaSeq = append(arenaSeq, e.Seq)
			arenaPrev = append(arenaPrev, s.head)
			s.head = int32(len(arenaSeq) - 1)
		}
	}
	// applied records: per (consumer, order, source), in position order
	agid := make(map[[3]int32]int32, len(ix.Applied)/2+1)
	group := make([]int32, len(ix.Applied))
	var lastPos []int64
	sorted := true
	for n := range ix.Applied {
		a := &ix.Applied[n]
		group[n] = -1
		if a.Seq <= 0 || a.Source == "" || a.ord < 0 {
			continue
		}
		k := [3]int32{a.consumer, a.ord, a.src}
		g, ok := agid[k]
		if !ok {
			g = int32(len(lastPos))
			agid[k] = g
			lastPos = append(lastPos, a.Position)
		} else if a.Position < lastPos[g] {
			sorted = false
		} else {
			lastPos[g] = a.Position
		}
		group[n] = g
	}
	order := make([]int32, 0, len(ix.Applied))
	for n := range ix.Applied {
		if group[n] >= 0 {
			order = append(order, int32(n))
		}
	}
	if !sorted {
		sort.SliceStable(order, func(x, y int) bool {
			a, c := &ix.Applied[order[x]], &ix.Applied[order[y]]
			if group[order[x]] != group[order[y]] {
				return group[order[x]] < group[order[y]]
			}
			return a.Position < c.Position
		})
	}
	// highest seq applied so far per (group, partition of the record)
	type amax struct {
		seq int64
		n   int32
	}
	maxes := make(map[[2]int32]amax, len(agid))
	var appliedChecked int64
	for _, n := range order {
		a := &ix.Applied[n]
		en, ok := ix.EventsByID[a.EventID]
		if !ok {
			continue
		}
		appliedChecked++
		k := [2]int32{group[n], ix.Events[en].part}
		if m, ok := maxes[k]; ok && a.Seq < m.seq {
			p := &ix.Applied[m.n]
			b.flag("applied-out-of-order", a.Order, fmt.Sprintf("consumer %s applied %s seq %d (position %d) after seq %d (position %d)", a.Consumer, a.Source, a.Seq, a.Position, p.Seq, p.Position), p.Op, a.Op)
			continue
		}
		maxes[k] = amax{a.Seq, n}
	}
	b.stats["events"] = int64(len(ix.Events))
	b.stats["events-skipped"] = skipped
	b.stats["applied-checked"] = appliedChecked
}
