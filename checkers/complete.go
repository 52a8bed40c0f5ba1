package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// A verdict's preconditions (DESIGN §7): a history must prove it is
// complete, and that something happened the checkers could judge, before
// any checker may say valid. CheckAll turns every valid result of a history
// that fails them into unknown, naming what is missing; a violation stays a
// violation, because every checker reads an absence only behind the
// closing op of the snapshot that proves it, and a cut-off history (the
// only kind the reader accepts: indices are dense, so damage is a suffix)
// has lost a suffix, not what came before the closing op.

// Incomplete says what a complete run writes that the history lacks (""
// when it has everything):
//   - the run-end op (the harness writes it after the last observation;
//     without it the history was cut short or the run never finished);
//   - the closing op of the Kafka log (kafka-snapshot), which every
//     observer writes, and of the saga list (orders-snapshot), which it
//     writes for every target that declares a saga;
//   - when the observer wrote its plan (observe-plan), the closing op of
//     every snapshot it listed: each declared counted resource
//     (resource:<name>; stock in an older history), outbox and applied per
//     database, drain watch per database, committed offsets per consumer
//     group;
//   - every closing op's row count equal to the rows recorded before it
//     (since the previous closing op of its kind).
func (ix *Index) Incomplete() string {
	var miss []string
	if ix.RunEndOp < 0 {
		m := "no run-end op (the history was cut short or the run never finished)"
		if ix.Truncated {
			m = "no run-end op (the history's last line was cut off mid-write)"
		}
		miss = append(miss, m)
	}
	need := []string{models.SnapKafka}
	if !ix.NoSaga {
		need = append(need, models.SnapOrders)
	}
	if ix.Plan != nil {
		need = append(need, ix.Plan.Snapshots...)
	}
	var open []string
	for _, n := range need {
		if !ix.closed[n] && !slices.Contains(open, n) {
			open = append(open, n)
		}
	}
	if len(open) > 0 {
		miss = append(miss, "snapshots never closed: "+strings.Join(open, ", "))
	}
	miss = append(miss, ix.miscount...)
	return strings.Join(miss, "; ")
}

// observedAll reports whether every snapshot whose name starts with prefix
// (models.SnapOutboxPfx, models.SnapApplied …) was written: with the
// observer's plan, every planned one is closed; without it (an older
// history), the run finished (run-end). A rule that reads an absence
// across several snapshots — a record in no applied snapshot, a row in no
// outbox — needs it, or a cut history would hide what came after the cut.
func (ix *Index) observedAll(prefix string) bool {
	if ix.Plan == nil {
		return ix.RunEndOp >= 0
	}
	for _, n := range ix.Plan.Snapshots {
		if strings.HasPrefix(n, prefix) && !ix.closed[n] {
			return false
		}
	}
	return true
}

// Vacuous says why nothing in the history could be judged ("" when
// something could): no saga was started (no order was acknowledged or
// found in the target's final state), and no outbox row or broker record
// was observed. A run whose every request was refused proves nothing about
// the target, so it is unknown, not valid. An outbox-only target (no saga)
// is not vacuous once it wrote or published a message.
func (ix *Index) Vacuous() string {
	for _, id := range ix.OrderIDs {
		if o := ix.Orders[id]; len(o.Acks) > 0 || o.FinalOp >= 0 {
			return ""
		}
	}
	if len(ix.Rows) > 0 || len(ix.Events) > 0 {
		return ""
	}
	return "vacuous: no saga started (no order was acknowledged or observed) and no message was committed or published: nothing to judge"
}

// preconditions applies Incomplete and Vacuous to one result. A snapshot
// whose closing op disagrees with the rows before it is worse than a cut:
// the absence of a row behind it proves nothing, so even a violation is
// not trusted then.
func (ix *Index) preconditions(r *models.CheckResult, incomplete, vacuous string) {
	if r.Status == models.Invalid && len(ix.miscount) > 0 {
		r.Status = models.Unknown
		r.Unknown = fmt.Sprintf("history inconsistent: %s; %d violation(s) not trusted", strings.Join(ix.miscount, "; "), len(r.Violations))
		r.Violations = nil
		return
	}
	if r.Status != models.Valid {
		return
	}
	switch {
	case len(ix.miscount) > 0:
		r.Status, r.Unknown = models.Unknown, "history inconsistent: "+strings.Join(ix.miscount, "; ")
	case incomplete != "":
		r.Status, r.Unknown = models.Unknown, "history incomplete: "+incomplete
	case vacuous != "":
		r.Status, r.Unknown = models.Unknown, vacuous
	default:
		return
	}
	r.NotApplicable = ""
}

// Health is what a history says about the target's components' health:
// every lifecycle op, the heal step's end, and the declared instances. The
// checkers and the observer's waits (harness/observe) judge "every
// component was healthy" with the same code.
type Health struct {
	Life     []LifeFact
	Healed   *models.Healed
	HealedT  int64 // -1: no healed op
	HealedOp int64
	HealErr  string
	// Instances declared by the target op (nil: not declared).
	Instances []string
}

// HealthOf reads the health facts of ops (lifecycle ops, nemesis crashes
// and restarts, the healed and target ops, a failed heal phase) and
// nothing else, so the observer can call it on the history so far.
func HealthOf(ops []models.Op) *Health {
	ix := &Index{Ops: ops, Bad: map[string][]int64{}, HealedOp: -1}
	ix.Target, ix.TargetOp, _ = declOf(ops)
	for k := range ops {
		op := &ops[k]
		if op.Type != models.Info {
			continue
		}
		switch {
		case op.Proc == models.ProcHarness && (op.F == models.FHealed || op.F == models.FPhase):
			ix.harness(op)
		case strings.HasPrefix(op.Proc, models.ProcComponentPrefix):
			ix.lifecycle(op)
		case op.Proc == models.ProcNemesis && (op.F == "crash" || op.F == "restart"):
			ix.lifecycle(op)
		}
	}
	return ix.health()
}

func (ix *Index) health() *Health {
	h := &Health{Life: ix.Life, Healed: ix.Healed, HealedT: -1, HealedOp: ix.HealedOp, HealErr: ix.HealErr}
	if ix.HealedOp >= 0 {
		h.HealedT = ix.Ops[ix.HealedOp].T
	}
	if ix.Target != nil {
		h.Instances = ix.Target.Instances
	}
	return h
}

// From returns the earliest time at or after from since which every
// instance of insts (nil: every instance the history knows) was healthy up
// to to, or why that cannot be shown: an instance that exited or crashed
// and was not healthy again by to, an instance listed unhealthy by the
// heal step, or (with the lifecycle vocabulary in use) an instance with no
// lifecycle op at all. An older history journals only crashes and
// restarts: an instance it never names was up since heal, which waited
// for every instance to be healthy (unless the heal step said it failed).
// evidence are the ops of instances becoming healthy inside the window.
func (h *Health) From(insts []string, from, to int64) (start int64, why string, evidence []int64) {
	start = from
	if h.HealErr != "" {
		return start, "the heal step failed: " + h.HealErr, nil
	}
	relevant := func(name string) bool { return insts == nil || slices.Contains(insts, name) }
	type st struct {
		up, known bool
		op        int64
		f         string
	}
	state := map[string]*st{}
	get := func(name string) *st {
		s := state[name]
		if s == nil {
			s = &st{up: true, op: -1}
			state[name] = s
		}
		return s
	}
	vocab := false
	life := h.Life
	if h.Healed != nil && h.HealedT >= 0 && len(h.Healed.Unhealthy) > 0 {
		// the heal step's verdict is a health change at its time
		life = slices.Clone(h.Life)
		for _, n := range h.Healed.Unhealthy {
			life = append(life, LifeFact{Op: h.HealedOp, T: h.HealedT, Instance: n, F: models.FHealed})
		}
		slices.SortStableFunc(life, func(a, b LifeFact) int { return cmp.Compare(a.T, b.T) })
	}
	for _, l := range life {
		if l.F != "crash" && l.F != "restart" && l.F != models.FHealed {
			vocab = true
		}
		if !relevant(l.Instance) || l.T > to {
			continue
		}
		s := get(l.Instance)
		s.known = true
		s.f = l.F
		if l.T <= from {
			s.up, s.op = l.Up, l.Op
			continue
		}
		if !l.Up {
			s.up, s.op = false, l.Op
			continue
		}
		if !s.up { // back up inside the window: the window starts here
			s.up = true
			start = max(start, l.T)
			evidence = append(evidence, l.Op)
		}
		s.op = l.Op
	}
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if s := state[n]; !s.up {
			if s.f == models.FHealed {
				return start, fmt.Sprintf("%s was not healthy at the end of heal (op #%d)", n, s.op), evidence
			}
			return start, fmt.Sprintf("%s was not healthy at the last check (op #%d)", n, s.op), evidence
		}
	}
	if vocab {
		for _, n := range h.Instances {
			if relevant(n) && !get(n).known {
				return start, fmt.Sprintf("no lifecycle op of %s: its health is not recorded", n), evidence
			}
		}
	}
	return start, "", evidence
}

func (ix *Index) healthyFrom(insts []string, from, to int64) (int64, string, []int64) {
	ix.healthOnce.Do(func() { ix.healthCache = ix.health() })
	return ix.healthCache.From(insts, from, to)
}

// healedT is the time the heal step ended (0 when the history has no
// healed op: then the observer's own start, which follows heal, bounds
// every window).
func (ix *Index) healedT() int64 {
	if ix.HealedOp < 0 {
		return 0
	}
	return ix.Ops[ix.HealedOp].T
}

// dur renders a history-time span for a message.
func dur(ns int64) string { return time.Duration(ns).Round(10 * time.Millisecond).String() }
