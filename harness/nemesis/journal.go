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
	Detail   map[string]string
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
			Failed: fr.Error != "", Error: fr.Error, Position: orders, Detail: fr.Detail})
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
}

func (o Outcome) String() string {
	if o.Position < 0 {
		return o.What
	}
	return fmt.Sprintf("%s at order %d", o.What, o.Position)
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
		case e.Failed && strings.HasPrefix(e.Error, "skipped"):
			o.What = e.Error
		case e.Failed && e.Phase != models.PhaseEnd:
			o.What = "failed: " + e.Error
		case e.Failed && e.Phase == models.PhaseEnd:
			o.What += "; undo failed: " + e.Error
		case e.Phase == models.PhaseStart || e.Phase == models.PhaseInstant:
			o.What, o.Position = orDefault(e.Effect, "applied"), e.Position
			if e.Effect == "armed" || (e.Kind == "failpoint" && e.Effect == "") {
				// Armed is not an effect: only a fired entry is.
				o.What, o.Position = "armed, never fired", -1
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
// fault: did each take the same effect, and at the same workload position?
type Fidelity struct {
	Faults     int // planned faults in the original
	SameEffect int
	SamePlace  int
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
		if same && r.Position == o.Position {
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

// Line is the one-line summary repro prints.
func (f Fidelity) Line() string {
	return fmt.Sprintf("replay fidelity: %d/%d faults took the same effect, %d/%d at the same workload position", f.SameEffect, f.Faults, f.SamePlace, f.Faults)
}
