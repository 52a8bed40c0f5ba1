package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// The narrative: one generated line above each violation's timeline that
// tells what happened, e.g.
//
//	o-f52b… was accepted at 595.8 ms; relay-2 hit failpoint
//	relay.after-publish (crash, hit 6) and exited (signal: killed) at
//	638.8 ms, 43.0 ms after o-f52b… was accepted; relay-2 was restarted at
//	887.0 ms; outbox row orders#20 OrderCreated (seq 1) of o-f52b… is marked
//	published; it is not in the complete Kafka log (251 records)
//
// Every clause states only what ops of the history say and cites them
// (clause.Ops): the violation's own ops, the order's acceptance, and the
// component events nearest to them. The checker's own one-line message
// stays beside it; the narrative never restates a conclusion no op holds.

// clause is one fact of the narrative and the ops that hold it.
type clause struct {
	Text string
	Ops  []int64
	at   int64 // when the fact happened, for the order of the story
}

// narrator holds what every narrative of one report needs.
type narrator struct {
	h       *models.History
	comp    *components
	faults  []faultWindow
	started int64 // header start, Unix ns (0: unknown)
	relays  map[string]bool
	// live ops (client, world, broker) per order named by a violation, in
	// history order; filled by newNarrator.
	live     map[string][]int64
	accepted map[string]int64
}

func newNarrator(h *models.History, comp *components, faults []faultWindow, v models.Verdict) *narrator {
	n := &narrator{h: h, comp: comp, faults: faults, live: map[string][]int64{}, accepted: map[string]int64{}, relays: map[string]bool{}}
	if ts, err := time.Parse(time.RFC3339Nano, h.Header.Started); err == nil {
		n.started = ts.UnixNano()
	}
	if comp != nil {
		for _, r := range comp.Relays {
			n.relays[r] = true
		}
	}
	want := map[string]bool{}
	for _, r := range v.Results {
		for _, vi := range r.Violations {
			if vi.Order != "" {
				want[vi.Order] = true
			}
		}
	}
	if len(want) == 0 {
		return n
	}
	for _, op := range h.Ops {
		if op.Order == "" || !want[op.Order] || op.Type == models.State || op.Proc == models.ProcObserver && op.Type != models.Event {
			continue
		}
		n.live[op.Order] = append(n.live[op.Order], op.I)
		if strings.HasPrefix(op.Proc, models.ProcClientPfx) && op.Type == models.Ok { // a saga start (the workload's op)
			if _, ok := n.accepted[op.Order]; !ok {
				n.accepted[op.Order] = op.I
			}
		}
	}
	return n
}

func (n *narrator) op(i int64) (models.Op, bool) {
	if i >= 0 && i < int64(len(n.h.Ops)) && n.h.Ops[i].I == i {
		return n.h.Ops[i], true
	}
	for _, op := range n.h.Ops {
		if op.I == i {
			return op, true
		}
	}
	return models.Op{}, false
}

// when is the time an op's fact happened: a broker record's log
// timestamp (not when the observer read it), else the op's time.
func (n *narrator) when(op models.Op) int64 {
	if op.Type == models.Event && n.started != 0 {
		var ev struct {
			TS int64 `json:"timestamp_ns"`
		}
		if op.Decode(&ev) == nil && ev.TS > n.started && ev.TS-n.started < op.T {
			return ev.TS - n.started
		}
	}
	return op.T
}

// isLive: an op that happened during the run rather than an observation
// read after it.
func isLive(op models.Op) bool {
	switch {
	case op.Type == models.State:
		return false
	case op.Proc == models.ProcHarness:
		return false
	case op.Proc == models.ProcObserver:
		return op.Type == models.Event
	}
	return true
}

// narrate tells the story of one violation.
func (n *narrator) narrate(vi models.Violation) []clause {
	var cited []models.Op
	seen := map[int64]bool{}
	for _, i := range vi.Ops {
		if seen[i] {
			continue
		}
		seen[i] = true
		if op, ok := n.op(i); ok {
			cited = append(cited, op)
		}
	}
	if len(cited) == 0 {
		return nil
	}
	var live, obs []models.Op
	for _, op := range cited {
		if isLive(op) {
			live = append(live, op)
		} else {
			obs = append(obs, op)
		}
	}
	sort.SliceStable(live, func(a, b int) bool { return n.when(live[a]) < n.when(live[b]) })
	var out []clause

	// The time anchor: the order's acceptance (cited or not), else the
	// first live cited op.
	var anchor *models.Op
	anchorName := ""
	if i, ok := n.accepted[vi.Order]; ok && vi.Order != "" {
		if op, ok := n.op(i); ok {
			anchor, anchorName = &op, vi.Order+" was accepted"
			if !seen[i] {
				out = append(out, clause{Text: fmt.Sprintf("%s was accepted at %s", vi.Order, fmtT(op.T)), Ops: []int64{i}, at: op.T})
			}
		}
	}
	if anchor == nil && len(live) > 0 {
		op := live[0]
		anchor = &op
	}

	// The cited live ops, in time order; a repeat of the same effect says
	// "again".
	nth := map[string]int{}
	firstT := map[string]int64{}
	for _, op := range live {
		txt := n.describe(op, vi)
		if op.Type == models.Effect {
			nth[op.F]++
			if k := nth[op.F]; k == 1 {
				firstT[op.F] = n.when(op)
			} else {
				txt += fmt.Sprintf(" (the %s %s, %s after the first)", ordinal(k), op.F, fmtDelta(n.when(op)-firstT[op.F]))
			}
		}
		if anchor != nil && anchor.I == op.I && anchorName == "" {
			anchorName = shortOf(op)
		}
		out = append(out, clause{Text: txt, Ops: []int64{op.I}, at: n.when(op)})
	}

	// The nearest component events, and a fault window around the anchor.
	cc, times := n.componentClauses(vi, live, anchor, anchorName)
	out = append(out, cc...)
	if anchor != nil {
		times = append(times, anchor.T)
	}
	if c, ok := n.faultClause(vi, times); ok {
		out = append(out, c)
	}
	// What happened during the run, in the order it happened.
	sort.SliceStable(out, func(a, b int) bool { return out[a].at < out[b].at })

	// Observations: what was observed of the order first, then the
	// snapshots that make its absence evidence; several final order states
	// of other orders in one clause.
	sort.SliceStable(obs, func(a, b int) bool { return obsRank(obs[a]) < obsRank(obs[b]) })
	var states []models.Op
	for _, op := range obs {
		if op.Type == models.State && op.F == models.FOrderState && (op.Order != vi.Order || vi.Kind == "key-reused") {
			states = append(states, op)
			continue
		}
		if c, ok := n.observation(op, vi, cited); ok {
			out = append(out, c)
		}
	}
	if len(states) > 0 {
		out = append(out, n.orderStates(states, vi))
	}
	return out
}

func obsRank(op models.Op) int {
	switch op.F {
	case models.FInitStock, models.FResourceInit:
		return 0
	case models.FOutboxRow, models.FApplied:
		return 1
	case models.FStockState, models.FResourceState, models.FOrderState:
		return 2
	}
	return 3
}

func ordinal(k int) string {
	switch {
	case k%100 >= 11 && k%100 <= 13:
		return strconv.Itoa(k) + "th"
	case k%10 == 1:
		return strconv.Itoa(k) + "st"
	case k%10 == 2:
		return strconv.Itoa(k) + "nd"
	case k%10 == 3:
		return strconv.Itoa(k) + "rd"
	}
	return strconv.Itoa(k) + "th"
}

func shortOf(op models.Op) string {
	return fmt.Sprintf("%s %s", op.Proc, op.F)
}

// describe states what one live op says.
func (n *narrator) describe(op models.Op, vi models.Violation) string {
	at := " at " + fmtT(n.when(op))
	switch {
	case strings.HasPrefix(op.Proc, models.ProcClientPfx): // a saga start, named by the workload's op
		switch op.Type {
		case models.Invoke:
			var p models.PlaceOrder
			_ = op.Decode(&p)
			return fmt.Sprintf("%s sent %s with key %s%s", op.Proc, op.F, p.Key, at)
		case models.Ok:
			var r models.PlaceOrderReply
			_ = op.Decode(&r)
			if r.Replayed {
				return fmt.Sprintf("%s's %s with key %s was answered from the idempotency store as %s%s", op.Proc, op.F, r.Key, op.Order, at)
			}
			return fmt.Sprintf("%s's %s with key %s was accepted as %s%s", op.Proc, op.F, r.Key, op.Order, at)
		case models.Fail:
			var f models.ClientFailure
			_ = op.Decode(&f)
			return fmt.Sprintf("%s's %s was refused (%d %s)%s", op.Proc, op.F, f.Status, f.Code, at)
		default:
			var f models.ClientFailure
			_ = op.Decode(&f)
			return fmt.Sprintf("%s's %s got no definite answer (%s)%s", op.Proc, op.F, oneLine(f.Error, 80), at)
		}
	case op.Type == models.Effect:
		switch op.F {
		case models.FCharge:
			var c models.ChargeEffect
			_ = op.Decode(&c)
			s := fmt.Sprintf("%s charged %d for %s as %s%s", op.Proc, c.Amount, op.Order, c.ChargeID, at)
			if c.Status == models.ChargeDeclined {
				s = fmt.Sprintf("%s declined a charge of %d for %s%s", op.Proc, c.Amount, op.Order, at)
			}
			return s + effectNote(c.Replay, c.Ambiguous)
		case models.FRefund:
			var r models.RefundEffect
			_ = op.Decode(&r)
			return fmt.Sprintf("%s refunded %d of %s as %s%s", op.Proc, r.Amount, r.ChargeID, r.RefundID, at) + effectNote(r.Replay, r.Ambiguous)
		case models.FShipment:
			var s models.ShipmentEffect
			_ = op.Decode(&s)
			return fmt.Sprintf("%s booked shipment %s for %s%s", op.Proc, s.ShipmentID, op.Order, at) + effectNote(s.Replay, s.Ambiguous)
		case models.FEmail:
			var e models.EmailEffect
			_ = op.Decode(&e)
			return fmt.Sprintf("%s sent %s e-mail %s for %s%s", op.Proc, article(e.Kind), e.EmailID, op.Order, at)
		}
		return fmt.Sprintf("%s recorded %s for %s%s", op.Proc, op.F, op.Order, at)
	case op.Type == models.Event:
		var ev models.EventRecord
		_ = op.Decode(&ev)
		src := ev.Source
		if src == "" {
			src = "a producer"
		}
		s := fmt.Sprintf("%s published %s (seq %d) of %s to %s/%d at offset %d", src, op.F, ev.Seq, op.Order, ev.Topic, ev.Partition, ev.Offset)
		if ev.Key == "" {
			s += " with an empty key"
		}
		return s + at
	case strings.HasPrefix(op.Proc, models.ProcComponentPrefix):
		if m, ok := n.comp.markAt(op.I); ok {
			return markText(m) + at
		}
	case op.Proc == models.ProcNemesis:
		var fr models.FaultRecord
		_ = op.Decode(&fr)
		return strings.TrimSpace(fmt.Sprintf("the nemesis applied %s %s (%s)", orDash(fr.Kind), fr.Target, fr.Phase)) + at
	}
	return fmt.Sprintf("%s %s %s%s", op.Proc, op.Type, op.F, at)
}

func article(kind string) string {
	if kind == "" {
		return "an"
	}
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

func effectNote(replay bool, ambiguous string) string {
	s := ""
	if replay {
		s += " (a replay from its idempotency store: nothing new moved)"
	}
	switch ambiguous {
	case "":
	case "500":
		s += ", then answered the caller with a 500"
	case "hang":
		s += ", then never answered the caller"
	default:
		s += ", answered ambiguously (" + ambiguous + ")"
	}
	return s
}

// markText says what a component mark records, without its time.
func markText(m compMark) string {
	switch m.Kind {
	case cmStart:
		if m.Label == "restart" {
			return m.Inst + " was restarted"
		}
		return m.Inst + " started"
	case cmHealthy:
		return m.Inst + " became healthy"
	case cmCrash:
		s := m.Inst + " exited by itself"
		if m.Status != "" {
			s += " (" + m.Status + ")"
		}
		return s
	case cmExit:
		if strings.HasPrefix(m.Cause, "fault:") {
			return m.Inst + " was killed by fault " + strings.TrimPrefix(m.Cause, "fault:")
		}
		return m.Inst + " was stopped"
	case cmFired:
		return fmt.Sprintf("%s hit failpoint %s (%s, hit %d)", m.Inst, m.Failpoint, orDash(m.Action), m.Hit)
	case cmReached:
		return fmt.Sprintf("%s reached failpoint %s", m.Inst, m.Failpoint)
	}
	return m.Inst + " " + m.Kind
}

// episode is one disruption of one instance: a fired failpoint and the
// exit it caused (or either alone), a kill, or a pause, with the restart
// that followed.
type episode struct {
	inst    string
	t       int64
	marks   []compMark
	restart *compMark
	pause   *compSpan
}

// componentClauses picks the disruptions nearest the anchor among the
// instances that matter for this kind (relays for outbox and broker
// kinds, every instance otherwise), inside the order's live span.
func (n *narrator) componentClauses(vi models.Violation, live []models.Op, anchor *models.Op, anchorName string) ([]clause, []int64) {
	if n.comp == nil || (len(n.comp.Marks) == 0 && len(n.comp.Spans) == 0) || anchor == nil {
		return nil, nil
	}
	from, to := n.window(vi, live, anchor)
	relevant := func(inst string) bool {
		if len(n.relays) == 0 || !outboxKind(vi) {
			return true
		}
		return n.relays[inst]
	}
	var eps []episode
	marks := n.comp.Marks
	for k := 0; k < len(marks); k++ {
		m := marks[k]
		if m.T < from || m.T > to || !relevant(m.Inst) {
			continue
		}
		if m.Kind != cmCrash && m.Kind != cmExit && !(m.Kind == cmFired) {
			continue
		}
		ep := episode{inst: m.Inst, t: m.T, marks: []compMark{m}}
		// A fired failpoint and the exit it caused, within 100 ms.
		for j := k + 1; j < len(marks) && marks[j].T-m.T <= int64(100*time.Millisecond); j++ {
			if marks[j].Inst != m.Inst {
				continue
			}
			if (m.Kind == cmFired && (marks[j].Kind == cmCrash || marks[j].Kind == cmExit)) ||
				((m.Kind == cmCrash || m.Kind == cmExit) && marks[j].Kind == cmFired) {
				ep.marks = append(ep.marks, marks[j])
				k = j
				break
			}
		}
		// The failpoint first: it is what made the process exit.
		sort.SliceStable(ep.marks, func(a, b int) bool { return ep.marks[a].Kind == cmFired && ep.marks[b].Kind != cmFired })
		for j := k + 1; j < len(marks); j++ {
			if marks[j].Inst == m.Inst && marks[j].Kind == cmStart {
				r := marks[j]
				ep.restart = &r
				break
			}
		}
		eps = append(eps, ep)
	}
	for k := range n.comp.Spans {
		s := n.comp.Spans[k]
		if s.Kind == csPaused && s.S >= from && s.S <= to && relevant(s.Inst) {
			eps = append(eps, episode{inst: s.Inst, t: s.S, pause: &s})
		}
	}
	if len(eps) == 0 {
		return nil, nil
	}
	at := anchor.T
	if len(live) > 0 {
		at = n.when(live[0])
	}
	sort.SliceStable(eps, func(a, b int) bool { return absI(eps[a].t-at) < absI(eps[b].t-at) })
	if len(eps) > 2 {
		eps = eps[:2]
	}
	sort.SliceStable(eps, func(a, b int) bool { return eps[a].t < eps[b].t })
	var out []clause
	var times []int64
	for _, ep := range eps {
		c := clause{at: ep.t}
		times = append(times, ep.t)
		if ep.pause != nil {
			c.Text = fmt.Sprintf("%s was paused at %s for %s", ep.inst, fmtT(ep.pause.S), fmtDelta(ep.pause.E-ep.pause.S))
			c.Ops = []int64{ep.pause.Op}
		} else {
			var parts []string
			for k, m := range ep.marks {
				t := markText(m)
				if k > 0 {
					t = strings.TrimPrefix(t, m.Inst+" ")
				}
				parts = append(parts, t)
				c.Ops = appendOnce(c.Ops, m.Op)
			}
			c.Text = strings.Join(parts, " and ") + " at " + fmtT(ep.t)
		}
		rel := ep.t - anchor.T
		if anchorName != "" && rel != 0 {
			dir := "after"
			if rel < 0 {
				dir = "before"
			}
			c.Text += fmt.Sprintf(", %s %s %s", fmtDelta(absI(rel)), dir, anchorName)
			c.Ops = appendOnce(c.Ops, anchor.I)
		}
		out = append(out, c)
		if ep.restart != nil {
			out = append(out, clause{Text: fmt.Sprintf("%s at %s", markText(*ep.restart), fmtT(ep.restart.T)), Ops: []int64{ep.restart.Op}, at: ep.restart.T})
		}
	}
	return out, times
}

// window is where component events count as near: from the order's
// first live op (or the first cited live op) to its last live op, plus
// a second.
func (n *narrator) window(vi models.Violation, live []models.Op, anchor *models.Op) (int64, int64) {
	from, to := anchor.T, anchor.T
	grow := func(t int64) { from, to = min(from, t), max(to, t) }
	for _, op := range live {
		grow(n.when(op))
	}
	for _, i := range n.live[vi.Order] {
		if op, ok := n.op(i); ok {
			grow(n.when(op))
		}
	}
	return from, to + int64(time.Second)
}

func outboxKind(vi models.Violation) bool {
	switch vi.Checker {
	case "no-lost-event", "no-phantom-event", "per-aggregate-order", "outbox-drains", "no-lost-delivery":
		return vi.Kind != "applied-out-of-order"
	}
	return false
}

// faultClause names a fault window (a link, the database, the broker;
// component faults are told by the component clauses) that was in effect
// at one of the given times (the anchor, the component events told):
// preferably one whose target names the instance of a component clause.
func (n *narrator) faultClause(vi models.Violation, times []int64) (clause, bool) {
	if len(times) == 0 {
		return clause{}, false
	}
	var hits []faultWindow
	best := -1
	for _, f := range n.faults {
		if f.Instant || f.Err != "" || componentFault(f.Kind) || f.Kind == "failpoint" {
			continue
		}
		active := false
		for _, t := range times {
			if f.Start <= t && t <= f.End {
				active = true
			}
		}
		if !active {
			continue
		}
		if best < 0 && n.comp != nil {
			for _, m := range n.comp.Marks {
				if m.Kind != cmReached && m.Kind != cmHealthy && m.T >= f.Start && m.T <= f.End && strings.Contains(f.Target, m.Inst) {
					best = len(hits)
					break
				}
			}
		}
		hits = append(hits, f)
	}
	if len(hits) == 0 {
		return clause{}, false
	}
	if best < 0 {
		best = 0
	}
	f := hits[best]
	txt := strings.TrimSpace(fmt.Sprintf("the nemesis's %s %s", f.Kind, f.Target)) + fmt.Sprintf(" was in effect from %s to %s", fmtT(f.Start), fmtT(f.End))
	if f.Open {
		txt = strings.TrimSpace(fmt.Sprintf("the nemesis's %s %s", f.Kind, f.Target)) + fmt.Sprintf(" was in effect from %s and never healed", fmtT(f.Start))
	}
	if len(hits) > 1 {
		txt += fmt.Sprintf(" (with %d other fault window(s))", len(hits)-1)
	}
	return clause{Text: txt, Ops: []int64{f.Ops[0]}, at: f.Start}, true
}

// observation states what a cited observation says, in the terms of the
// violation's kind where the same op means different things.
func (n *narrator) observation(op models.Op, vi models.Violation, cited []models.Op) (clause, bool) {
	c := clause{Ops: []int64{op.I}}
	switch op.F {
	case models.FOrderState:
		var st models.OrderState
		_ = op.Decode(&st)
		c.Text = fmt.Sprintf("%s ended %s", op.Order, st.Status)
		if vi.Checker == "conservation" && st.Total != 0 {
			c.Text += fmt.Sprintf(" with total %d", st.Total)
		}
	case models.FOutboxRow:
		var r models.OutboxRow
		_ = op.Decode(&r)
		c.Text = fmt.Sprintf("outbox row %s#%d %s (seq %d) of %s is ", r.DB, r.ID, r.Type, r.Seq, op.Order)
		if r.Published {
			c.Text += "marked published"
		} else {
			c.Text += "not marked published"
		}
	case models.FKafkaSnapshot:
		var s models.KafkaSnapshot
		_ = op.Decode(&s)
		if vi.Kind == "lost-event" {
			c.Text = fmt.Sprintf("the record is not in the complete Kafka log (%d records)", s.Records)
		} else {
			c.Text = fmt.Sprintf("the complete Kafka log (%d records) was read", s.Records)
		}
	case models.FOutboxSnapshot:
		var s models.OutboxSnapshot
		_ = op.Decode(&s)
		switch {
		case vi.Kind == "phantom-event":
			c.Text = fmt.Sprintf("the complete outbox of %s (%d rows) has no committed row for it", s.DB, s.Rows)
		case strings.HasPrefix(vi.Kind, "kept-"):
			c.Text = fmt.Sprintf("no compensating event follows it in the complete outbox of %s (%d rows)", s.DB, s.Rows)
		default:
			c.Text = fmt.Sprintf("the complete outbox of %s (%d rows) was read", s.DB, s.Rows)
		}
	case models.FOrdersSnapshot:
		var s models.Snapshot
		_ = op.Decode(&s)
		if vi.Kind == "lost-order" {
			c.Text = fmt.Sprintf("the target's complete order list (%d orders) does not list %s", s.Rows, vi.Order)
		} else {
			c.Text = fmt.Sprintf("the target's complete order list (%d orders) was read", s.Rows)
		}
	case models.FQuiesce:
		var q models.Quiesce
		_ = op.Decode(&q)
		pending := false
		for _, p := range q.Pending {
			if p == vi.Order && p != "" {
				pending = true
			}
		}
		switch {
		case pending:
			c.Text = fmt.Sprintf("%s was still in flight when quiescence gave up after %d ms", vi.Order, q.WaitedMS)
		case q.AllTerminal:
			c.Text = fmt.Sprintf("quiescence saw every saga terminal after %d ms", q.WaitedMS)
		default:
			c.Text = fmt.Sprintf("quiescence ended after %d ms with %d saga(s) in flight", q.WaitedMS, len(q.Pending))
		}
	case models.FApplied:
		var a models.Applied
		_ = op.Decode(&a)
		c.Text = fmt.Sprintf("consumer %s applied %s seq %d (%s) of %s at position %d", a.Consumer, a.Source, a.Seq, a.Type, op.Order, a.Position)
	case models.FStockState:
		var s models.StockState
		_ = op.Decode(&s)
		c.Text = fmt.Sprintf("%s ended with %d available and %d reserved", s.SKU, s.Available, s.Reserved)
	case models.FResourceState:
		var s models.ResourceState
		_ = op.Decode(&s)
		c.Text = fmt.Sprintf("%s %s ended with %d available and %d reserved", s.Resource, s.Key, s.Available, s.Reserved)
	case models.FResourceInit:
		var ri models.ResourceInit
		_ = op.Decode(&ri)
		var parts []string
		for _, o := range cited {
			var s models.ResourceState
			if o.F == models.FResourceState && o.Decode(&s) == nil && s.Resource == ri.Resource {
				parts = append(parts, fmt.Sprintf("%s %s started with %d", s.Resource, s.Key, ri.Amounts[s.Key]))
			}
		}
		if len(parts) == 0 {
			c.Text = fmt.Sprintf("the run started with %d key(s) of %s", len(ri.Amounts), ri.Resource)
			break
		}
		c.Text = strings.Join(parts, ", ")
	case models.FInitStock:
		var is models.InitialStock
		_ = op.Decode(&is)
		// Name the SKUs the other cited ops are about.
		var skus []string
		for _, o := range cited {
			if o.F == models.FStockState {
				var s models.StockState
				if o.Decode(&s) == nil {
					skus = append(skus, s.SKU)
				}
			}
		}
		if len(skus) == 0 {
			c.Text = fmt.Sprintf("the run started with %d SKU(s) in stock", len(is.Stock))
			break
		}
		var parts []string
		for _, s := range skus {
			parts = append(parts, fmt.Sprintf("%s started with %d", s, is.Stock[s]))
		}
		c.Text = strings.Join(parts, ", ")
	default:
		c.Text = fmt.Sprintf("%s recorded %s %s", op.Proc, op.Type, op.F)
	}
	return c, true
}

// orderStates groups the final states of other orders a violation cites
// (the orders holding a SKU, the twin of a reused key).
func (n *narrator) orderStates(states []models.Op, vi models.Violation) clause {
	by := map[string][]string{}
	var statuses []string
	c := clause{}
	key := map[string]bool{}
	for _, op := range states {
		var st models.OrderState
		_ = op.Decode(&st)
		if _, ok := by[st.Status]; !ok {
			statuses = append(statuses, st.Status)
		}
		by[st.Status] = append(by[st.Status], op.Order)
		c.Ops = append(c.Ops, op.I)
		key[st.IdempotencyKey] = true
	}
	if vi.Kind == "key-reused" && len(key) == 1 {
		var orders []string
		for _, s := range statuses {
			orders = append(orders, by[s]...)
		}
		for k := range key {
			c.Text = fmt.Sprintf("%s all carry idempotency key %s", listOf(orders, 4), k)
		}
		if len(orders) == 2 {
			c.Text = strings.Replace(c.Text, " all carry", " both carry", 1)
		}
		return c
	}
	var parts []string
	for _, s := range statuses {
		os := by[s]
		if len(os) == 1 {
			parts = append(parts, fmt.Sprintf("%s ended %s", os[0], s))
		} else {
			parts = append(parts, fmt.Sprintf("%d orders ended %s (%s)", len(os), s, listOf(os, 3)))
		}
	}
	c.Text = strings.Join(parts, ", ")
	return c
}

func listOf(xs []string, n int) string {
	if len(xs) <= n {
		if len(xs) == 2 {
			return xs[0] + " and " + xs[1]
		}
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:n], ", ") + " and " + strconv.Itoa(len(xs)-n) + " more"
}

func appendOnce(xs []int64, x int64) []int64 {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func absI(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// fmtT formats a time since the run's start.
func fmtT(ns int64) string {
	switch a := absI(ns); {
	case a < int64(time.Millisecond):
		return fmt.Sprintf("%d µs", ns/1000)
	case a < int64(time.Second):
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3f s", float64(ns)/1e9)
}

// fmtDelta formats a duration.
func fmtDelta(ns int64) string { return fmtT(ns) }
