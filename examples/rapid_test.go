package examples

import (
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/scenarios"
)

// TestReferenceUnderChaos is the pattern for a user's own target: load the
// manifest and a scenario, and let harness.Check drive it with rapid. Each
// case is a real run (PostgreSQL, Kafka, processes, faults); a failing one is
// shrunk and saved as a fail file that replays first next time. Check runs 3
// cases (1 under -short); `go test ./examples -rapid.checks=20` runs more.
func TestReferenceUnderChaos(t *testing.T) {
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.Load("relay-crash")
	if err != nil {
		t.Fatal(err)
	}
	// Keep each case small: a property test wants many quick runs.
	spec.Sagas = scenarios.Range{Min: 5, Max: 25}
	spec.Limits.Quiesce = scenarios.Duration(60 * time.Second)
	harness.Check(t, m, spec)
}
