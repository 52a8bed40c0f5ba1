package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// generalScenarios are the scenarios that must catch planted bugs without
// help (README: the general ones).
var generalScenarios = []string{"calm", "relay-crash", "consumer-crash", "orchestrator-crash", "db-crash", "broker-flaky",
	"partition-payment", "redelivery-storm", "gateway-ambiguous", "pause", "everything"}

// TestGeneralScenariosOnReferenceCDC runs every general scenario (seed 1)
// against the reference with the CDC relay: each must end valid. Under
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
	out := t.TempDir()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			spec, err := scenarios.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := scenarios.Generate(spec, 1, target.Catalog(m, fps))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(ctx, Options{Manifest: m, Scenario: sc, Bin: bin, RunDir: filepath.Join(out, name)})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.Verdict.Status != models.Valid {
				msg := ""
				for _, r := range res.Verdict.Results {
					if r.Status != models.Valid {
						msg += fmt.Sprintf("\n  %s %s %s", r.Checker, r.Status, r.Unknown)
						for i, v := range r.Violations {
							if i == 3 {
								break
							}
							msg += fmt.Sprintf("\n    order %s: %s (ops %v)", v.Order, v.Message, v.Ops)
						}
					}
				}
				t.Fatalf("the correct reference-cdc is %s on %s seed 1 (run dir %s):%s", res.Verdict.Status, name, res.RunDir, msg)
			}
		})
	}
}
