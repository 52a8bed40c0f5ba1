package checkers

import (
	"fmt"
	"slices"
	"sort"
	"strings"
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
//
// Seq gaps (checkSeqGaps) complete it: a gap in the log is legal only
// where the missing seq went to another topic.
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
	if ix.KafkaSnap != nil && ix.KafkaSnap.Complete {
		checkSeqGaps(ix, b)
	}
}

// checkSeqGaps is the seq-gap half of per-aggregate-order. Per (source,
// aggregate) — a source's rows are those of its outbox database, found as
// Index.SourceDB finds it — and with a complete Kafka log:
//
//   - seq-gap: a committed row (in the outbox snapshot) of seq k and topic
//     T whose event_id is not in the log, while a record of the same
//     source, aggregate and topic T with a seq above k is. Rows of one
//     aggregate commit in seq order (the contract), so k was committed
//     before that record was published: its consumers saw k+… without k.
//   - vanished-row: a seq k, 1 ≤ k < m, in neither the source's outbox rows
//     nor the log, where m is the highest seq of the (source, aggregate) in
//     either. Seqs are dense (the contract: 1, 2, 3 … per source and
//     aggregate, a rolled-back transaction takes none), and a row may be
//     deleted only after it was published (an outbox query that is not
//     complete allows that), when its record is in the complete log — so a
//     seq in neither was deleted before publication, or never written.
//     Needs the database's outbox read without error.
//
// A database that more than one source maps to is skipped (its seqs may
// be of several counters), as are rows and records without a seq.
//
// A target whose records carry no seq (TargetDecl.SeqFromOutbox; seq.go
// ranks each aggregate's rows by id) gets seq-gap with those ranks — sound
// under the same assumption as the ranks themselves, that one aggregate's
// rows are written in saga order, so a lower-ranked row committed before a
// higher-ranked one — but vanished-row is not applicable: a rank counts
// only the rows still in the outbox, so a row deleted before it was
// published leaves no gap, and a record whose row is gone has no rank. The
// rule is then neither judged nor counted (the result says so in
// RulesNotApplicable), never judged on guessed ranks.
func checkSeqGaps(ix *Index, b *builder) {
	vanishedNA := ix.SeqFromOutbox
	if vanishedNA {
		b.ruleNotApplicable("vanished-row", "the target's records carry no seq (seq from the outbox): a row deleted before publication leaves no gap in the ranks of the rows still there")
	}
	// the database of each interned source, and the sources per database
	srcDB := make([]int32, len(ix.names)) // index into dbNames, -1 none
	var dbNames []string
	perDB := map[string]int{}
	dbIndex := map[string]int32{}
	for i := range srcDB {
		srcDB[i] = -1
	}
	for name, id := range ix.names {
		db, ok := ix.SourceDB(name)
		if !ok || name == "" {
			continue
		}
		if _, snap := ix.OutboxSnaps[db]; !snap {
			continue
		}
		perDB[db]++
		k, seen := dbIndex[db]
		if !seen {
			k = int32(len(dbNames))
			dbIndex[db] = k
			dbNames = append(dbNames, db)
		}
		srcDB[id] = k
	}
	for id, k := range srcDB {
		if k >= 0 && perDB[dbNames[k]] > 1 {
			srcDB[id] = -1 // several seq counters in one database
		}
	}
	// each row's database and seq, in one linear pass
	rowK := make([]int32, len(ix.Rows))
	lastDB, lastK := "\x00", int32(-1)
	for n := range ix.Rows {
		if db := ix.Rows[n].DB; db != lastDB {
			lastDB, lastK = db, -1
			if k, ok := dbIndex[db]; ok && perDB[db] <= 1 {
				lastK = k
			}
		}
		rowK[n] = lastK
		if ix.Rows[n].Seq <= 0 {
			rowK[n] = -1
		}
	}
	// per (order, database): the seqs seen (a bitmask up to 63, a list
	// beyond), the highest and its op, and the rows not in the log
	type group struct {
		k       int32
		mask    uint64
		big     []int64
		max, op int64
		notLog  []int32
	}
	var groups []group
	get := func(k int32) *group {
		for i := range groups {
			if groups[i].k == k {
				return &groups[i]
			}
		}
		if len(groups) < cap(groups) { // reuse a group's buffers
			groups = groups[:len(groups)+1]
			g := &groups[len(groups)-1]
			*g = group{k: k, big: g.big[:0], notLog: g.notLog[:0]}
			return g
		}
		groups = append(groups, group{k: k})
		return &groups[len(groups)-1]
	}
	see := func(g *group, seq, op int64) {
		if seq < 64 {
			g.mask |= 1 << uint(seq)
		} else {
			g.big = append(g.big, seq)
		}
		if seq > g.max {
			g.max, g.op = seq, op
		}
	}
	var missing []int64
	var gaps, vanished int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		if len(o.Rows) == 0 && len(o.Events) == 0 {
			continue
		}
		groups = groups[:0]
		for _, en := range o.Events {
			e := &ix.Events[en]
			if k := srcDB[e.src]; k >= 0 && e.Seq > 0 && e.Malformed == "" {
				see(get(k), e.Seq, e.Op)
			}
		}
		for _, rn := range o.Rows {
			if k := rowK[rn]; k >= 0 {
				g := get(k)
				see(g, ix.Rows[rn].Seq, ix.Rows[rn].Op)
				if !ix.RowInLog(int(rn)) {
					g.notLog = append(g.notLog, rn)
				}
			}
		}
		for gi := range groups {
			g := &groups[gi]
			db := dbNames[g.k]
			// seq-gap: a row not in the log below a record of its topic
			var flaggedTopics []string
			for _, rn := range g.notLog {
				r := &ix.Rows[rn]
				if r.Topic == "" || slices.Contains(flaggedTopics, r.Topic) {
					continue
				}
				var above, aboveOp int64
				for _, en := range o.Events {
					e := &ix.Events[en]
					if srcDB[e.src] == g.k && e.Malformed == "" && e.Topic == r.Topic && e.Seq > r.Seq && (above == 0 || e.Seq < above) {
						above, aboveOp = e.Seq, e.Op
					}
				}
				if above == 0 {
					continue
				}
				flaggedTopics = append(flaggedTopics, r.Topic)
				gaps++
				b.flag("seq-gap", id, fmt.Sprintf("%s seq %d (committed, topic %s) is not in the log, but seq %d of the same aggregate and topic is", db, r.Seq, r.Topic, above), r.Op, aboveOp, ix.KafkaOp)
			}
			// vanished-row: a seq in neither the rows nor the log
			if vanishedNA {
				continue
			}
			missing = missing[:0]
			if g.max < 64 {
				if full := uint64(1)<<uint(g.max+1) - 2; g.mask&full == full {
					continue // 1..max all seen: the common case
				}
				for k := int64(1); k < g.max; k++ {
					if g.mask&(1<<uint(k)) == 0 {
						missing = append(missing, k)
					}
				}
			} else {
				seen := slices.Clone(g.big)
				slices.Sort(seen)
				for k := int64(1); k < 64 && k < g.max; k++ {
					if g.mask&(1<<uint(k)) == 0 {
						missing = append(missing, k)
					}
				}
				want := int64(64)
				for _, v := range seen {
					for ; want < v; want++ {
						missing = append(missing, want)
					}
					if v >= want {
						want = v + 1
					}
				}
			}
			if len(missing) == 0 || ix.OutboxSnaps[db].Error != "" {
				continue
			}
			vanished += int64(len(missing))
			list := fmt.Sprint(missing)
			if len(missing) > 8 {
				list = fmt.Sprintf("%v … (%d seqs)", missing[:8], len(missing))
			}
			b.flag("vanished-row", id, fmt.Sprintf("%s seq %s of this aggregate vanished before publication: in neither the outbox nor the complete log, below seq %d, which exists", db, strings.Trim(list, "[]"), g.max), g.op, ix.OutboxSnaps[db].Op, ix.KafkaOp)
		}
	}
	b.stats["seq-gaps"] = gaps
	if !vanishedNA {
		b.stats["seqs-vanished"] = vanished
	}
}
