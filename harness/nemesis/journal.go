package nemesis

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// JournalEntry is one op of the fault journal in a history: a fault the
// nemesis applied, ended, skipped or saw fire.
type JournalEntry struct {
	ID, Kind, Phase, Target string
	// Effect is what took effect ("killed", "already down: held by f2",
	// "fired"); empty in histories older than the effect field.
	Effect string
	Failed bool
	Error  string
	// Position is the workload position of the op: the orders invoked
	// before it.
	Position int
	// T is the op's time on the history's clock.
	T      int64
	Detail map[string]string
}

func (j JournalEntry) String() string {
	s := fmt.Sprintf("%s %s %s %s", j.ID, j.Kind, j.Phase, j.Target)
	if j.Failed {
		s += " (failed)"
	}
	return s
}

// FaultJournal extracts the planned faults' journal from a history. Crashes
// and restarts the target did by itself ("crash", "restart") are outcomes,
// not plan, and are left out.
func FaultJournal(h *models.History) []JournalEntry {
	var out []JournalEntry
	orders := 0
	for _, op := range h.Ops {
		if op.Type == models.Invoke && op.F == models.FPlaceOrder {
			var po models.PlaceOrder
			if op.Decode(&po) == nil && po.Attempt <= 1 {
				orders++
			}
			continue
		}
		if op.Proc != models.ProcNemesis || op.F == "crash" || op.F == "restart" {
			continue
		}
		var fr models.FaultRecord
		if op.Decode(&fr) != nil {
			continue
		}
		out = append(out, JournalEntry{ID: fr.ID, Kind: fr.Kind, Phase: fr.Phase, Target: fr.Target, Effect: fr.Detail["effect"],
			Failed: fr.Error != "", Error: fr.Error, Position: orders, T: op.T, Detail: fr.Detail})
	}
	return out
}

// Outcome is what one planned fault did in a run, as its journal says.
type Outcome struct {
	ID, Kind, Target string
	// What is the effect in words: "killed", "skipped: …", "failed: …",
	// "fired on relay-1 at hit 3", "armed, never fired".
	What string
	// Position is the workload position where it took effect (its start,
	// or where an armed fault fired); -1 when it never did.
	Position int
	// Trigger is the event that started it when its trigger was an event
	// (the nemesis journals it as detail "trigger"), without where in the
	// log the event sat: "PaymentCharged record #3 for orders". Empty for
	// a fault triggered by the order count.
	Trigger string

	armedAt int // the workload position where it was armed
}

func (o Outcome) String() string {
	switch {
	case o.Position < 0:
		return o.What
	case o.Trigger != "":
		return fmt.Sprintf("%s at %s (order %d)", o.What, o.Trigger, o.Position)
	}
	return fmt.Sprintf("%s at order %d", o.What, o.Position)
}

// triggerEvent is the event of a journaled trigger without its place in
// the log ("… at op 1234", "… at orders/2@17"), which differs from run to
// run even when the event is the same.
func triggerEvent(s string) string {
	if i := strings.LastIndex(s, " at "); i >= 0 {
		return s[:i]
	}
	return s
}

// Outcomes folds a journal into one outcome per fault, in plan order.
func Outcomes(j []JournalEntry) []Outcome {
	idx := map[string]int{}
	var out []Outcome
	for _, e := range j {
		i, ok := idx[e.ID]
		if !ok {
			i = len(out)
			idx[e.ID] = i
			out = append(out, Outcome{ID: e.ID, Kind: e.Kind, Target: e.Target, Position: -1})
		}
		o := &out[i]
		switch {
		case e.Phase == models.PhaseFired:
			o.What = fmt.Sprintf("fired on %s at hit %s", e.Detail["instance"], e.Detail["hit"])
			o.Position = e.Position
			o.Trigger = triggerEvent(e.Detail["trigger"])
		case e.Failed && strings.HasPrefix(e.Error, "skipped"):
			o.What = e.Error
		case e.Failed && e.Phase != models.PhaseEnd:
			o.What = "failed: " + e.Error
		case e.Failed && e.Phase == models.PhaseEnd:
			o.What += "; undo failed: " + e.Error
		case e.Phase == models.PhaseEnd && o.What == "armed, never fired" && e.Detail["hits"] != "" && e.Detail["hits"] != "0":
			// A fault armed for its window (a broker error on the next
			// requests) took effect if its undo counted hits.
			o.What, o.Position = "armed, hit "+e.Detail["hits"]+" times", o.armedAt
		case e.Phase == models.PhaseStart || e.Phase == models.PhaseInstant:
			o.What, o.Position, o.Trigger = orDefault(e.Effect, "applied"), e.Position, triggerEvent(e.Detail["trigger"])
			if armedOnly(e) {
				// Armed is not an effect: only a fired entry is, or an
				// undo that counted hits.
				o.What, o.Position, o.Trigger, o.armedAt = "armed, never fired", -1, "", e.Position
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return planOrder(out[a].ID) < planOrder(out[b].ID) })
	return out
}

// planOrder sorts f2 before f10.
func planOrder(id string) string { return fmt.Sprintf("%8s", id) }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Fidelity compares the faults of a replay with the original's, fault by
// fault: did each take the same effect, at the same workload position (or,
// for a fault started by an event, at the same triggering event), and —
// when both histories are at hand (CompareRuns) — did it meet the sagas at
// the same steps?
type Fidelity struct {
	Faults     int // planned faults in the original
	SameEffect int
	SamePlace  int
	// SameSteps counts the faults that took the same effect and found the
	// in-flight sagas at mostly the same moments (Hit; sameSteps); set by
	// CompareRuns only (Steps true).
	SameSteps int
	Steps     bool
	// StepsDiffer lists, for faults that took the same effect, where the
	// sagas they met differ: "f3 kill payment: met 2 ChargePayment, 1
	// placed; replay met 1 StockReserved".
	StepsDiffer []string
	// Differ lists the faults whose effect or position differ, as
	// "f3 kill relay-1: killed at order 14, replay: already down: held by f2 at order 15".
	Differ []string
	// NeverFired lists the armed faults that never fired, in the original
	// or the replay.
	NeverFired []string
}

// Compare builds the fidelity of replay against original.
func Compare(original, replay []JournalEntry) Fidelity {
	a, b := Outcomes(original), Outcomes(replay)
	got := map[string]Outcome{}
	for _, o := range b {
		got[o.ID] = o
	}
	f := Fidelity{Faults: len(a)}
	for _, o := range a {
		r, ok := got[o.ID]
		if !ok {
			r = Outcome{ID: o.ID, What: "not in the replay's journal", Position: -1}
		}
		same := r.What == o.What && r.Kind == o.Kind && r.Target == o.Target
		if same {
			f.SameEffect++
		}
		if same && samePlace(o, r) {
			f.SamePlace++
		} else {
			f.Differ = append(f.Differ, fmt.Sprintf("%s %s %s: %s, replay: %s", o.ID, o.Kind, o.Target, o, r))
		}
		switch {
		case o.What == "armed, never fired" && r.What == "armed, never fired":
			f.NeverFired = append(f.NeverFired, fmt.Sprintf("%s %s %s: armed, never fired (original and replay)", o.ID, o.Kind, o.Target))
		case o.What == "armed, never fired":
			f.NeverFired = append(f.NeverFired, fmt.Sprintf("%s %s %s: armed, never fired in the original", o.ID, o.Kind, o.Target))
		case r.What == "armed, never fired":
			f.NeverFired = append(f.NeverFired, fmt.Sprintf("%s %s %s: armed, never fired in the replay", o.ID, o.Kind, o.Target))
		}
	}
	return f
}

// samePlace: an event-triggered fault is in place when the same event
// started it (its workload position is then timing); any other fault when
// it took effect at the same workload position.
func samePlace(o, r Outcome) bool {
	if o.Trigger != "" || r.Trigger != "" {
		return o.Trigger == r.Trigger
	}
	return r.Position == o.Position
}

// CompareRuns is Compare of the two histories' journals, and for every
// fault that took the same effect in both, whether it met the in-flight
// sagas at the same moments (Hits).
func CompareRuns(original, replay *models.History) Fidelity {
	f := Compare(FaultJournal(original), FaultJournal(replay))
	f.Steps = true
	a, b := Outcomes(FaultJournal(original)), Outcomes(FaultJournal(replay))
	got := map[string]Outcome{}
	for _, o := range b {
		got[o.ID] = o
	}
	ha, hb := hitsByID(Hits(original)), hitsByID(Hits(replay))
	for _, o := range a {
		r, ok := got[o.ID]
		x, okA := ha[o.ID]
		y, okB := hb[o.ID]
		if !ok || r.What != o.What || !okA || !okB {
			continue
		}
		if sameSteps(x, y) {
			f.SameSteps++
			continue
		}
		f.StepsDiffer = append(f.StepsDiffer, fmt.Sprintf("%s %s %s: met %s; replay met %s", o.ID, o.Kind, o.Target, x.Steps(), y.Steps()))
	}
	return f
}

func hitsByID(hs []Hit) map[string]Hit {
	out := map[string]Hit{}
	for _, h := range hs {
		if _, ok := out[h.ID]; !ok {
			out[h.ID] = h
		}
	}
	return out
}

// Line is the one-line summary repro prints.
func (f Fidelity) Line() string {
	s := fmt.Sprintf("replay fidelity: %d/%d faults took the same effect, %d/%d at the same workload position", f.SameEffect, f.Faults, f.SamePlace, f.Faults)
	if f.Steps {
		s += fmt.Sprintf(" or triggering event, %d/%d met the sagas at the same steps", f.SameSteps, f.Faults)
	}
	return s
}
