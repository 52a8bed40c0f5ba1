package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// TestNamedScenariosOnReference runs every named scenario (seed 1) against
// the correct reference target: each must end valid — a violation here is a
// bug in the target or a false positive in a checker, and either is a
// defect. Under -short only calm and everything run; `make scenarios` runs
// seeds 1–3 of all of them.
func TestNamedScenariosOnReference(t *testing.T) {
	m, bin, fps := prepareReference(t)
	names := scenarios.Names()
	if testing.Short() {
		names = []string{"calm", "everything"}
	}
	runValidOnSeed1(t, m, bin, fps, names)
}

// runValidOnSeed1 runs each named scenario's seed 1 against the target of
// m, at a quarter of its length (the general scenarios last tens of
// seconds; make scenarios runs them whole), and fails a subtest for every
// run that does not end valid, naming the checkers and the first
// violations.
func runValidOnSeed1(t *testing.T, m *targets.Manifest, bin string, fps []targets.Failpoint, names []string) {
	t.Helper()
	ctx := context.Background()
	out := t.TempDir()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			spec, err := scenarios.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Duration > 0 {
				spec = spec.Scaled(0.25)
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
				t.Fatalf("the correct %s is %s on %s seed 1 (run dir %s):%s", m.Name, res.Verdict.Status, name, res.RunDir, msg)
			}
		})
	}
}
