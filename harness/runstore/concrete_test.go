package runstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/scenarios"
)

// TestReadScenarioFile: a run's scenario.json and a bare scenario are
// concrete; a spec of ranges is not (the caller then reads it as a spec);
// a bad fault names the field.
func TestReadScenarioFile(t *testing.T) {
	dir := t.TempDir()
	sc := scenarios.Scenario{Name: "calm", Seed: 4, Workload: scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{{Key: "k-1", Body: []byte(`{"card":"tok_visa"}`)}}},
		Faults: []scenarios.Fault{{ID: "f1", Kind: "kill", Target: "payment", AfterOrders: 1}}}
	wrapped := filepath.Join(dir, "scenario.json")
	if err := WriteJSON(wrapped, Scenario{Target: "reference", Mutant: "dual-write", Scenario: sc}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadScenarioFile(wrapped)
	if err != nil || got.Mutant != "dual-write" || got.Scenario.Seed != 4 || len(got.Scenario.Faults) != 1 {
		t.Fatalf("wrapped: %+v, %v", got, err)
	}
	bare := filepath.Join(dir, "bare.json")
	if err := WriteJSON(bare, sc); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadScenarioFile(bare); err != nil || got.Target != "" || len(got.Scenario.Workload.Sagas) != 1 {
		t.Fatalf("bare: %+v, %v", got, err)
	}
	spec := filepath.Join(dir, "spec.json")
	os.WriteFile(spec, []byte(`{"name": "x", "orders": {"min": 1, "max": 2}}`), 0o644)
	if _, err := ReadScenarioFile(spec); !errors.Is(err, ErrNotConcrete) {
		t.Errorf("spec: %v, want ErrNotConcrete", err)
	}
	// An older scenario.json's orders are read as sagas.
	old := filepath.Join(dir, "old.json")
	os.WriteFile(old, []byte(`{"target": "reference", "scenario": {"name": "calm", "seed": 1, "workload": {"initial_stock": {"sku-1": 3}, "clients": 1, "orders": [{"key": "k-1", "card": "tok_visa", "total": 100}]}, "limits": {}}}`), 0o644)
	if got, err := ReadScenarioFile(old); err != nil || len(got.Scenario.Workload.Sagas) != 1 {
		t.Errorf("older scenario.json: %+v, %v", got, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"workload": {"orders": []}, "faults": [{"id": "f1", "kind": "latency", "params": {"latency_ms": -5}}]}`), 0o644)
	if _, err := ReadScenarioFile(bad); err == nil || !strings.Contains(err.Error(), "latency_ms") {
		t.Errorf("bad fault: %v", err)
	}
}
