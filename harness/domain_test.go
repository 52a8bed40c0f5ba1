package harness

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// runTarget builds the target of manifest (a path from the repository
// root) and runs it once on a small calm scenario (seed 1), with a health
// deadline for a slow start on a loaded machine (a Node.js process of the
// trip target took 44 s to start at a load average of 40).
func runTarget(t *testing.T, manifest string, sagas int) (*targets.Manifest, models.Verdict, string) {
	t.Helper()
	m, err := target.Find(filepath.Join("..", manifest))
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.Load("calm")
	if err != nil {
		t.Fatal(err)
	}
	spec.Sagas = scenarios.Range{Min: sagas, Max: sagas}
	sc, err := scenarios.Generate(spec, 1, target.Catalog(m, fps))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{Manifest: m, Scenario: sc, Bin: bin, RunDir: filepath.Join(t.TempDir(), "run"), HealthTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("run %s: %v", m.Name, err)
	}
	return m, res.Verdict, res.RunDir
}

// A target with another saga shape, other statuses and another world,
// declared only as manifest data (targets/tinytrip: choreographed, PENDING /
// BOOKED / ABORTED, an airline and a bank, no seq header), runs end to end
// and every checker judges it: valid, none unknown or not applicable.
func TestSecondTargetFromManifestData(t *testing.T) {
	_, v, dir := runTarget(t, "targets/tinytrip/manifest.json", 25)
	if v.Status != models.Valid {
		t.Fatalf("tinytrip is %s (run dir %s): %+v", v.Status, dir, v.Results)
	}
	for _, r := range v.Results {
		if r.Status != models.Valid || r.NotApplicable != "" {
			t.Errorf("%s: %s %s", r.Checker, r.Status, r.NotApplicable)
		}
	}
	h, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Sagas started: distinct trips answered (a duplicate or a concurrent
	// copy of a start, the workload's races, is answered with the same trip).
	trips := map[string]bool{}
	var bookings, events int
	for _, op := range h.Ops {
		switch {
		case op.F == "book-trip" && op.Type == models.Ok:
			trips[op.Order] = true
		case op.Proc == "world/airline" && op.F == "book":
			bookings++
		case op.Type == models.Event:
			events++
		}
	}
	if len(trips) != 25 || bookings < 25 || events == 0 {
		t.Fatalf("history: %d trips answered, %d airline bookings, %d events", len(trips), bookings, events)
	}
	for _, r := range v.Results {
		if r.Checker == "per-aggregate-order" && r.Stats["events-skipped"] != 0 {
			t.Errorf("records without a seq header skipped: %+v (the seq comes from the outbox)", r.Stats)
		}
	}
}

// An outbox-only manifest (no saga) runs: the outbox checkers judge it and
// the saga checkers report not applicable — valid, with the reason.
func TestOutboxOnlyTarget(t *testing.T) {
	_, v, dir := runTarget(t, "targets/tinytrip/manifest.outbox-only.json", 15)
	if v.Status != models.Valid {
		t.Fatalf("outbox-only target is %s (run dir %s): %+v", v.Status, dir, v.Results)
	}
	na := map[string]bool{}
	for _, r := range v.Results {
		if r.NotApplicable != "" {
			na[r.Checker] = true
		}
	}
	for _, c := range []string{"saga-terminates", "all-or-nothing", "no-double-effect", "compensation-order", "pivot", "conservation", "no-lost-delivery"} {
		if !na[c] {
			t.Errorf("%s applies to a target with no saga, no resource and no consumer", c)
		}
	}
	for _, c := range []string{"no-lost-event", "no-phantom-event", "per-aggregate-order", "client-idempotency", "outbox-drains"} {
		if na[c] {
			t.Errorf("%s was not applied to the outbox-only target", c)
		}
	}
}
