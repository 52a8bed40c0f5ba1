package gate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
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
		Reference: reference, ReferenceSeeds: 1,
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
