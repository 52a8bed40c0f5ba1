package nemesis

import (
	"fmt"

	"github.com/sagachaos/sagachaos/models"
)

// JournalEntry is one fault the nemesis applied (or skipped), as journaled
// in a history: what a replay must match.
type JournalEntry struct {
	ID, Kind, Phase, Target string
	Failed                  bool
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
	for _, op := range h.Ops {
		if op.Proc != models.ProcNemesis || op.F == "crash" || op.F == "restart" {
			continue
		}
		var fr models.FaultRecord
		if op.Decode(&fr) != nil {
			continue
		}
		out = append(out, JournalEntry{ID: fr.ID, Kind: fr.Kind, Phase: fr.Phase, Target: fr.Target, Failed: fr.Error != ""})
	}
	return out
}

// Fidelity compares two fault journals entry by entry (by fault id and
// phase, order-insensitive): how many of the original's entries the replay
// matched, and the ones it did not.
func Fidelity(original, replay []JournalEntry) (matched int, missing []JournalEntry) {
	type key struct{ id, phase string }
	got := map[key]JournalEntry{}
	for _, e := range replay {
		got[key{e.ID, e.Phase}] = e
	}
	for _, e := range original {
		r, ok := got[key{e.ID, e.Phase}]
		if ok && r.Kind == e.Kind && r.Target == e.Target && r.Failed == e.Failed {
			matched++
			continue
		}
		missing = append(missing, e)
	}
	return matched, missing
}
