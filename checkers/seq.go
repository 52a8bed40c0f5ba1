package checkers

import "sort"

// deriveSeqs gives records a seq when the target declares none (TargetDecl
// SeqFromOutbox: an off-the-shelf outbox library with no per-aggregate
// counter). The assumption, documented in docs/target-contract.md: one
// aggregate's outbox rows are written in saga order, so within one
// database, an aggregate's rows ordered by id are its commit order. Each
// row gets its rank there (1, 2, …) as its seq, and a record (and an
// applied record) with no seq of its own gets its row's, found by
// event_id; one with no source header gets the row's database as source.
// A record whose row is gone keeps seq 0 and is skipped, as a record
// without a seq always was: ranks are never guessed.
func (ix *Index) deriveSeqs() {
	if !ix.SeqFromOutbox {
		return
	}
	type group struct{ db, agg string }
	groups := map[group][]int32{}
	for n := range ix.Rows {
		r := &ix.Rows[n]
		if r.Order == "" {
			continue
		}
		k := group{r.DB, r.Order}
		groups[k] = append(groups[k], int32(n))
	}
	for _, rows := range groups {
		sort.Slice(rows, func(a, b int) bool { return ix.Rows[rows[a]].ID < ix.Rows[rows[b]].ID })
		for rank, n := range rows {
			if ix.Rows[n].Seq <= 0 {
				ix.Rows[n].Seq = int64(rank + 1)
			}
		}
	}
	row := func(eventID string) *RowFact {
		n, ok := ix.RowsByEvent[eventID]
		if !ok || eventID == "" {
			return nil
		}
		return &ix.Rows[n]
	}
	for n := range ix.Events {
		e := &ix.Events[n]
		r := row(e.EventID)
		if r == nil {
			continue
		}
		if e.Seq <= 0 {
			e.Seq = r.Seq
		}
		if e.Source == "" {
			e.Source = r.DB
			e.src = ix.intern(r.DB)
		}
	}
	for n := range ix.Applied {
		a := &ix.Applied[n]
		r := row(a.EventID)
		if r == nil {
			continue
		}
		if a.Seq <= 0 {
			a.Seq = r.Seq
		}
		if a.Source == "" {
			a.Source = r.DB
			a.src = ix.intern(r.DB)
		}
	}
}
