package examples

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// TestReferenceUnderChaos is the pattern for a user's own target: load the
// manifest, build it once, and let rapid drive the scenario generator. Each
// check is a real run (PostgreSQL, Kafka, processes, faults). Under -short
// it runs one small case; `go test ./examples -rapid.checks=20` runs more.
func TestReferenceUnderChaos(t *testing.T) {
	ctx := context.Background()
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.Load("relay-crash")
	if err != nil {
		t.Fatal(err)
	}
	// Keep each case small: a property test wants many quick runs.
	spec.Orders = scenarios.Range{Min: 5, Max: 25}
	spec.Limits.Quiesce = scenarios.Duration(60 * time.Second)
	gen := scenarios.ScenarioGen(spec, target.Catalog(m, fps))
	out := t.TempDir()
	// rapid's default of 100 checks is hours of real runs; unless
	// -rapid.checks is given, run 1 case under -short and 3 otherwise.
	limit := 3
	if testing.Short() {
		limit = 1
	}
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() != f.DefValue {
		limit = 1 << 30
	}
	checks := 0
	rapid.Check(t, func(rt *rapid.T) {
		if checks >= limit {
			return
		}
		checks++
		sc := gen.Draw(rt, "scenario")
		res, err := harness.Run(ctx, harness.Options{
			Manifest: m, Scenario: sc, Bin: bin,
			RunDir: filepath.Join(out, rapidRunName(checks)),
		})
		if err != nil {
			rt.Fatalf("run: %v", err)
		}
		if res.Verdict.Status != models.Valid {
			for _, r := range res.Verdict.Results {
				for _, v := range r.Violations {
					rt.Logf("%s: order %s: %s (ops %v)", v.Checker, v.Order, v.Message, v.Ops)
				}
			}
			rt.Fatalf("verdict %s; report: %s", res.Verdict.Status, filepath.Join(res.RunDir, "report.html"))
		}
	})
	if checks == 0 {
		t.Fatal("rapid ran no case")
	}
}

func rapidRunName(n int) string { return fmt.Sprintf("case-%03d", n) }
