package explore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/scenarios"
)

// TestMutantsStayValid: hundreds of mutants of generated scenarios, each
// decoded again from its JSON as `run --scenario FILE` reads it, aim only
// at what the run has and pass every kind's validation; every operator
// gets used.
func TestMutantsStayValid(t *testing.T) {
	m := testMutator(1)
	n := 600
	if testing.Short() {
		n = 150
	}
	var corpus []scenarios.Scenario
	used := map[string]int{}
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		var sc scenarios.Scenario
		if len(corpus) < 3 || i%5 == 0 {
			fresh, _, err := m.Fresh()
			if err != nil {
				t.Fatal(err)
			}
			sc = fresh
		} else {
			p, q := corpus[m.Rand.IntN(len(corpus))], corpus[m.Rand.IntN(len(corpus))]
			mut, ops, err := m.Mutate(p, &q)
			if err != nil {
				t.Fatalf("mutant %d: %v", i, err)
			}
			for _, op := range ops {
				name, _, _ := strings.Cut(op, " ")
				used[name]++
				if name == "shift" && (strings.Contains(op, " event #") || strings.Contains(op, " delay ")) {
					used["shift of an event trigger"]++
				}
			}
			sc = mut
		}
		if err := m.Valid(sc); err != nil {
			t.Fatalf("candidate %d invalid: %v", i, err)
		}
		path := filepath.Join(dir, "c.json")
		if err := runstore.WriteJSON(path, runstore.Scenario{Target: "reference", Scenario: sc}); err != nil {
			t.Fatal(err)
		}
		back, err := runstore.ReadScenarioFile(path)
		if err != nil {
			b, _ := os.ReadFile(path)
			t.Fatalf("candidate %d does not read back: %v\n%s", i, err, b)
		}
		a, _ := json.Marshal(sc)
		b, _ := json.Marshal(back.Scenario)
		if string(a) != string(b) {
			t.Fatalf("candidate %d changed on the way through its file:\n%s\n%s", i, a, b)
		}
		for j, f := range sc.Faults {
			if want := "f" + itoa(j+1); f.ID != want {
				t.Fatalf("candidate %d: fault %d is %s, want %s", i, j, f.ID, want)
			}
		}
		corpus = append(corpus, sc)
	}
	for _, op := range operators {
		if used[op.name] == 0 {
			t.Errorf("operator %s never applied in %d candidates (used: %v)", op.name, n, used)
		}
	}
	if used["shift of an event trigger"] == 0 {
		t.Errorf("no shift moved an event-triggered fault in %d candidates (used: %v)", n, used)
	}
}

// TestAMarkerIsNeverArmed: a fault that arms a reachability marker (a
// hand-written corpus entry) is not valid for the run.
func TestAMarkerIsNeverArmed(t *testing.T) {
	m := testMutator(1)
	sc, _, err := m.Fresh()
	if err != nil {
		t.Fatal(err)
	}
	var f scenarios.Fault
	if err := json.Unmarshal([]byte(`{"id":"f1","kind":"failpoint","target":"orders.timeout.charging","after_orders":0,"params":{"component":"orders","action":"crash","hit":1}}`), &f); err != nil {
		t.Fatal(err)
	}
	sc.Faults = []scenarios.Fault{f}
	if err := m.Valid(sc); err == nil || !strings.Contains(err.Error(), "marker") {
		t.Errorf("arming a marker: %v, want an error naming the marker", err)
	}
}

// TestRetargetFollowsTheRelayCount: a run with one relay has no relay-2;
// a mutant that cut the relays to one aims nothing at relay-2.
func TestRetargetFollowsTheRelayCount(t *testing.T) {
	m := testMutator(3)
	for i := 0; i < 200; i++ {
		sc, _, err := m.Fresh()
		if err != nil {
			t.Fatal(err)
		}
		sc.Replicas = map[string]int{"relay": 1}
		m.reaim(&sc)
		for _, f := range sc.Faults {
			b, _ := json.Marshal(f)
			if strings.Contains(string(b), "relay-2") || strings.Contains(string(b), "relay-3") {
				t.Fatalf("fault aims at a relay a one-relay run does not have: %s", b)
			}
		}
		if err := m.Valid(sc); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
