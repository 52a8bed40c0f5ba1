package harness

import (
	"context"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
)

// generalScenarios are the scenarios that must catch planted bugs without
// help (README: the general ones).
var generalScenarios = []string{"calm", "relay-crash", "consumer-crash", "orchestrator-crash", "db-crash", "broker-flaky",
	"partition-payment", "redelivery-storm", "gateway-ambiguous", "pause", "everything", "swarm"}

// TestGeneralScenariosOnReferenceCDC runs every general scenario (seed 1,
// at a quarter of its length as on the reference) against the reference
// with the CDC relay: each must end valid. Under
// -short only calm, db-crash and everything run (everything draws the CDC
// fault kinds).
func TestGeneralScenariosOnReferenceCDC(t *testing.T) {
	ctx := context.Background()
	m, err := target.Find("reference-cdc")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	names := generalScenarios
	if testing.Short() {
		names = []string{"calm", "db-crash", "everything"}
	}
	runValidOnSeed1(t, m, bin, fps, names)
}
