package harness

import (
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// requireNode fails (never skips) without Node.js ≥ 20 and npm: the trip
// target's manifest builds it with npm ci and tsc.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the TypeScript trip target needs %s (Node.js 20 or later with npm: https://nodejs.org/en/download, or .ci/run on a CI machine): %v", tool, err)
		}
	}
	out, err := exec.Command("node", "-p", "process.versions.node").Output()
	if err != nil {
		t.Fatalf("node -p process.versions.node: %v", err)
	}
	v := strings.TrimSpace(string(out))
	if major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); major < 20 {
		t.Fatalf("the TypeScript trip target needs Node.js 20 or later, found %s (https://nodejs.org/en/download)", v)
	}
}

// The TypeScript trip target (targets/trip: a choreographed saga of five
// Node.js services and a relay, written from docs/target-contract.md
// alone) builds from its manifest (npm ci, tsc), runs through the harness
// and is judged by the same checkers as the reference: valid, every
// checker applied. Its failpoint log and the four world providers its
// manifest declares show up in the history.
func TestTripTargetTypeScript(t *testing.T) {
	requireNode(t)
	_, v, dir := runTarget(t, "targets/trip/manifest.json", 20)
	if v.Status != models.Valid {
		t.Fatalf("trip is %s (run dir %s): %+v", v.Status, dir, v.Results)
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
	starts := map[string]bool{}
	providers := map[string]bool{}
	reached := map[string]bool{}
	for _, op := range h.Ops {
		switch {
		case op.F == "book-trip" && op.Type == models.Ok:
			starts[op.Order] = true
		case op.Type == models.Effect && strings.HasPrefix(op.Proc, "world/"):
			providers[strings.TrimPrefix(op.Proc, "world/")] = true
		case op.F == models.FFailpoint:
			var ev models.FailpointEvent
			if op.Decode(&ev) == nil {
				reached[ev.Failpoint] = true
			}
		}
	}
	if len(starts) != 20 {
		t.Errorf("%d trips started, want 20", len(starts))
	}
	for _, p := range []string{"airline", "hotel", "payments", "mailer"} {
		if !providers[p] {
			t.Errorf("no effect of world provider %s in the history (providers with effects: %v)", p, providers)
		}
	}
	for _, fp := range []string{"relay.after-publish", "trips.after-create", "flights.after-book", "payments.after-charge", "tickets.after-email"} {
		if !reached[fp] {
			t.Errorf("failpoint %s never reached (the failpoint log: %v)", fp, slices.Sorted(maps.Keys(reached)))
		}
	}
}

// Every general scenario, and every scenario a trip mutant names for the
// self-test, is one the generator accepts for trip: a scenario written for
// the reference's components (inventory, orders, payment→gateway) instead
// of by selectors (@consumer, @api, @pivot→@world) would make each of its
// runs an error instead of a chance to catch a bug.
func TestTripMutantScenariosApply(t *testing.T) {
	requireNode(t)
	m, err := target.Find(filepath.Join("..", "targets", "trip", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, fps, err := target.Prepare(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	cat := target.Catalog(m, fps)
	if len(m.Mutants) < 5 {
		t.Fatalf("trip declares %d mutants, want at least 5", len(m.Mutants))
	}
	for _, n := range generalScenarios {
		spec, err := scenarios.Load(n)
		if err == nil {
			err = spec.CheckAgainst(n, cat)
		}
		if err != nil {
			t.Errorf("general scenario on trip: %v", err)
		}
	}
	for _, mu := range m.Mutants {
		if len(mu.Scenarios) == 0 {
			t.Errorf("mutant %s names no scenario", mu.Name)
		}
		for _, n := range mu.Scenarios {
			spec, err := scenarios.Load(n)
			if err != nil {
				t.Errorf("mutant %s: %v", mu.Name, err)
				continue
			}
			if err := spec.CheckAgainst(n, cat); err != nil {
				t.Errorf("mutant %s: %v", mu.Name, err)
			}
		}
	}
}
