package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/scenarios"
)

// run --plan prints each seed's scenario without running it: the swarm's
// subset, the triggers of aimed faults, and --scale's shorter workload.
func TestPlanShowsTheScheduleAndScales(t *testing.T) {
	full := sagachaos(t, "run", "--scenario", "swarm", "--seed", "3", "--plan")
	if full.code != 0 {
		t.Fatalf("exit %d: %s", full.code, full.stderr)
	}
	var sc scenarios.Scenario
	if err := json.Unmarshal([]byte(full.stdout), &sc); err != nil {
		t.Fatalf("--plan printed no scenario: %v\n%s", err, full.stdout)
	}
	if sc.Swarm == nil || len(sc.Swarm.Kinds) == 0 {
		t.Fatal("a swarm plan without its swarm draw")
	}
	aimed := 0
	for _, f := range sc.Faults {
		if f.Trigger != nil {
			aimed++
		}
	}
	if aimed == 0 {
		t.Error("no fault of swarm seed 3 is aimed at a saga moment")
	}
	small := sagachaos(t, "run", "--scenario", "swarm", "--seed", "3", "--plan", "--scale", "0.2")
	var sc2 scenarios.Scenario
	if err := json.Unmarshal([]byte(small.stdout), &sc2); err != nil {
		t.Fatal(err)
	}
	if sc2.Scale != 0.2 || len(sc2.Workload.Sagas) >= len(sc.Workload.Sagas) {
		t.Fatalf("--scale 0.2: scale %v, %d sagas (full: %d)", sc2.Scale, len(sc2.Workload.Sagas), len(sc.Workload.Sagas))
	}
	if r := sagachaos(t, "run", "--scenario", "swarm", "--scale", "0", "--plan"); r.code != 2 || !strings.Contains(r.stderr, "--scale") {
		t.Fatalf("--scale 0: exit %d, %q", r.code, r.stderr)
	}
	if r := sagachaos(t, "selftest", "--scenarios", "swarm,no-such"); r.code != 2 || !strings.Contains(r.stderr, "no-such") {
		t.Fatalf("selftest --scenarios with an unknown one: exit %d, %q", r.code, r.stderr)
	}
}
