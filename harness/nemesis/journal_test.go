package nemesis

import (
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// history builds a history of place-order invokes ("o") and nemesis ops.
func history(t *testing.T, steps ...any) *models.History {
	t.Helper()
	rec, _ := models.NewRecorder(nil, models.Header{})
	for _, s := range steps {
		switch v := s.(type) {
		case string: // "o": one order invoked
			rec.Record("client-0", models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k", Attempt: 1})
		case models.FaultRecord:
			rec.Record(models.ProcNemesis, models.Info, v.Kind, "", v)
		}
	}
	return rec.History()
}

func fr(id, kind, phase, target string, detail map[string]string) models.FaultRecord {
	return models.FaultRecord{ID: id, Kind: kind, Phase: phase, Target: target, Detail: detail}
}

// TestFidelityTellsArmedFromFired: a failpoint armed in both runs but fired
// only in the original is a difference, said in words; a kill at another
// position is a difference of place, not of effect.
func TestFidelityTellsArmedFromFired(t *testing.T) {
	armed := fr("f1", "failpoint", models.PhaseInstant, "relay.after-publish", map[string]string{"effect": "armed", "armed": "relay-1"})
	fired := fr("f1", "failpoint", models.PhaseFired, "relay.after-publish", map[string]string{"effect": "fired", "instance": "relay-1", "hit": "3"})
	armed2 := fr("f3", "failpoint", models.PhaseInstant, "relay.after-mark", map[string]string{"effect": "armed", "armed": "relay-2"})
	kill := fr("f2", "kill", models.PhaseStart, "inventory", map[string]string{"effect": "killed"})
	killEnd := fr("f2", "kill", models.PhaseEnd, "inventory", map[string]string{"effect": "restarted"})
	orig := history(t, armed, armed2, "o", "o", kill, "o", fired, killEnd)
	again := history(t, armed, armed2, "o", "o", "o", kill, killEnd)

	f := Compare(FaultJournal(orig), FaultJournal(again))
	if f.Faults != 3 || f.SameEffect != 2 || f.SamePlace != 1 {
		t.Fatalf("fidelity %+v", f)
	}
	if got := f.Line(); got != "replay fidelity: 2/3 faults took the same effect, 1/3 at the same workload position" {
		t.Errorf("line %q", got)
	}
	want := []string{
		"f1 failpoint relay.after-publish: fired on relay-1 at hit 3 at order 3, replay: armed, never fired",
		"f2 kill inventory: killed at order 2, replay: killed at order 3",
	}
	if strings.Join(f.Differ, "\n") != strings.Join(want, "\n") {
		t.Errorf("differ:\n%s\nwant:\n%s", strings.Join(f.Differ, "\n"), strings.Join(want, "\n"))
	}
	never := strings.Join(f.NeverFired, "\n")
	if !strings.Contains(never, "f1 failpoint relay.after-publish: armed, never fired in the replay") ||
		!strings.Contains(never, "f3 failpoint relay.after-mark: armed, never fired (original and replay)") {
		t.Errorf("never fired:\n%s", never)
	}
}

func TestOutcomesOfSkippedAndFailed(t *testing.T) {
	h := history(t,
		models.FaultRecord{ID: "f1", Kind: "pause", Phase: models.PhaseInstant, Target: "x", Error: "skipped: the workload ended before its trigger"},
		models.FaultRecord{ID: "f2", Kind: "latency", Phase: models.PhaseInstant, Target: "no→such", Error: `no link "no→such"`},
		fr("f10", "db-crash", models.PhaseStart, "", map[string]string{"effect": "crashed"}),
		models.FaultRecord{ID: "f10", Kind: "db-crash", Phase: models.PhaseEnd, Error: "restart: boom"},
	)
	var got []string
	for _, o := range Outcomes(FaultJournal(h)) {
		got = append(got, o.ID+": "+o.String())
	}
	want := "f1: skipped: the workload ended before its trigger|f2: failed: no link \"no→such\"|f10: crashed; undo failed: restart: boom at order 0"
	if strings.Join(got, "|") != want {
		t.Errorf("outcomes\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}
