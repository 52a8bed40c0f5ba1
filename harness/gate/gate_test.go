package gate

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// TestGateFastSubset is the part of the self-test gate that runs on every
// `go test`: mutants that calm runs catch in seconds must be caught by their
// intended checker, and the correct reference must be valid. The whole gate
// is `make selftest`.
func TestGateFastSubset(t *testing.T) {
	ctx := context.Background()
	m, bin, fps := prepareReference(t)
	mutants := []string{"unkeyed-publish", "email-before-pivot", "no-semantic-lock"}
	reference := []string{"calm", "relay-crash"}
	if testing.Short() {
		mutants, reference = mutants[:1], reference[:1]
	}
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{
		Manifest: m, Bin: bin, Failpts: fps, OutDir: t.TempDir(),
		Env:     harness.Options{HealthTimeout: 30 * time.Second},
		Mutants: mutants, MutantSeeds: 4, DetectSeeds: 1,
		Reference: reference, ReferenceSeeds: 1, Scale: 0.25,
		Progress: func(s string) { progress.WriteString(s + "\n") },
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	t.Log("\n" + out.String())
	if len(rep.Mutants) != len(mutants) {
		t.Fatalf("gate ran %d mutants, want %d", len(rep.Mutants), len(mutants))
	}
	for _, mr := range rep.Mutants {
		if !mr.Caught {
			t.Errorf("mutant %s escaped (seeds %v): want %v, fired %q\n%s", mr.Mutant, mr.Seeds, mr.Expected, mr.FiredBy, progress.String())
		}
	}
	for _, r := range rep.Reference {
		if r.Status != models.Valid {
			t.Errorf("the correct reference was flagged on %s seed %d: %s %s (run dir %s)", r.Scenario, r.Seed, r.Status, r.Err, r.Dir)
		}
	}
	if !strings.Contains(out.String(), "failpoint coverage") {
		t.Error("the gate's report has no failpoint coverage matrix")
	}
}

// prepareReference finds, builds and catalogues the reference target.
func prepareReference(t *testing.T) (*targets.Manifest, string, []targets.Failpoint) {
	t.Helper()
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	return m, bin, fps
}

// The default reference runs are the named scenarios the target can run:
// every one for the reference, and for a target without a scenario's
// failpoints (here: the reference with none catalogued) the scenarios
// that name failpoints are left out, each with the generator's reason.
func TestApplicableScenarios(t *testing.T) {
	m, _, fps := prepareReference(t)
	run, skip := applicable(m, fps)
	if len(skip) != 0 || !slices.Equal(run, scenarios.Names()) {
		t.Fatalf("reference: runs %v, skips %+v; want every named scenario", run, skip)
	}
	run, skip = applicable(m, nil)
	for _, n := range scenarios.Names() {
		spec, err := scenarios.Load(n)
		if err != nil {
			t.Fatal(err)
		}
		named := len(spec.Faults.Failpoints) > 0
		skipped := slices.IndexFunc(skip, func(s SkippedScenario) bool { return s.Scenario == n })
		switch {
		case named && skipped < 0:
			t.Errorf("%s names failpoints the target does not declare but was not skipped", n)
		case named && !strings.Contains(skip[skipped].Reason, "unknown failpoint"):
			t.Errorf("%s skipped for %q, want the unknown failpoint", n, skip[skipped].Reason)
		case !named && !slices.Contains(run, n):
			t.Errorf("%s names no failpoint but was left out: %+v", n, skip)
		}
	}
}
