package shrink

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

func bigCase(orders int) scenarios.Scenario {
	sc := scenarios.Scenario{Name: "t", Seed: 1, Workload: scenarios.Workload{Clients: 3}, Replicas: map[string]int{"relay": 2}}
	for i := range orders {
		sc.Workload.Sagas = append(sc.Workload.Sagas, scenarios.SagaPlan{Key: fmt.Sprintf("k-%d", i+1), Client: i % 3, Submissions: 1 + i%2, RetryUnknown: 2,
			Body: []byte(`{"card":"tok_visa"}`)})
	}
	for i, after := range []int{2, 9, 12, 15} {
		sc.Faults = append(sc.Faults, scenarios.Fault{ID: fmt.Sprintf("f%d", i+1), Kind: "kill", Target: "payment", AfterOrders: after, Duration: 4e8})
	}
	return sc
}

// fails: the bug needs orders k-5 and k-11 and fault f2 firing after k-5
// (two kept orders before it, as in the original's k-1…k-9 before f2 — a
// trigger moved with the orders it followed).
func fails(sc scenarios.Scenario) bool {
	keys := map[string]int{}
	for i, o := range sc.Workload.Sagas {
		keys[o.Key] = i
	}
	i5, ok5 := keys["k-5"]
	_, ok11 := keys["k-11"]
	for _, f := range sc.Faults {
		if f.ID == "f2" && ok5 && ok11 && f.AfterOrders > i5 {
			return true
		}
	}
	return false
}

func fakeRun(flaky func() bool, runs *int) func(context.Context, harness.Options) (harness.Result, error) {
	return func(_ context.Context, o harness.Options) (harness.Result, error) {
		*runs++
		v := models.Verdict{Status: models.Valid}
		if fails(o.Scenario) && (flaky == nil || flaky()) {
			v = models.Verdict{Status: models.Invalid, Results: []models.CheckResult{{Checker: "pivot", Status: models.Invalid, Violations: []models.Violation{{Kind: "before-pivot"}}}}}
		}
		return harness.Result{RunDir: o.RunDir, Verdict: v}, nil
	}
}

// TestDeltaDebuggingFindsTheTwoOrdersAndTheFault: 20 orders and 4 faults
// shrink to the 2 orders and the 1 fault the bug needs, with the fault's
// trigger still after the first of them, then the value pass simplifies
// the rest; well inside the candidate bound.
func TestDeltaDebuggingFindsTheTwoOrdersAndTheFault(t *testing.T) {
	runs := 0
	res, err := Run(context.Background(), Options{Scenario: bigCase(20), Want: []string{"pivot/before-pivot"}, Tries: 1, Confirm: 3, MaxCandidates: 80, Run: fakeRun(nil, &runs)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range res.Minimal.Workload.Sagas {
		keys = append(keys, o.Key)
	}
	if !slices.Equal(keys, []string{"k-5", "k-11"}) || len(res.Minimal.Faults) != 1 || res.Minimal.Faults[0].ID != "f2" || res.Minimal.Faults[0].AfterOrders != 1 {
		t.Fatalf("minimal: orders %v, faults %+v", keys, res.Minimal.Faults)
	}
	m := res.Minimal
	if m.Workload.Clients != 1 || m.Replicas["relay"] != 1 || m.Workload.Sagas[1].Submissions != 1 || m.Workload.Sagas[0].RetryUnknown != 0 || m.Faults[0].Duration != 2e8 {
		t.Errorf("value pass left %+v", m)
	}
	if res.Stopped != "done" || res.Runs != 3 || res.Failures != 3 || res.Candidates > 60 || res.RunDir == "" {
		t.Errorf("result %+v", res)
	}
	t.Logf("%d candidates, %d accepted, %d runs", res.Candidates, res.Accepted, res.RunsMade)
}

// TestShrinkIsBoundedByCandidates: the bound stops it with the smallest
// failing case so far, whatever the clock.
func TestShrinkIsBoundedByCandidates(t *testing.T) {
	runs := 0
	res, err := Run(context.Background(), Options{Scenario: bigCase(20), Tries: 1, Confirm: 1, MaxCandidates: 12, Run: fakeRun(nil, &runs)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "candidates" || res.Candidates != 12 || len(res.Minimal.Workload.Sagas) >= 20 || !fails(res.Minimal) {
		t.Fatalf("result %+v (%d orders)", res, len(res.Minimal.Workload.Sagas))
	}
}

// TestFlakyFailuresUseTheRetryBudget: a bug that shows in one run of two
// is still shrunk with Tries 4, and the confirmation runs measure its rate.
func TestFlakyFailuresUseTheRetryBudget(t *testing.T) {
	runs, n := 0, 0
	flaky := func() bool { n++; return n%2 == 0 }
	res, err := Run(context.Background(), Options{Scenario: bigCase(20), Tries: 4, Confirm: 6, MaxCandidates: 60, Run: fakeRun(flaky, &runs)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Minimal.Workload.Sagas) != 2 || res.Runs != 6 || res.Failures != 3 {
		t.Fatalf("minimal %d orders, confirmation %d/%d", len(res.Minimal.Workload.Sagas), res.Failures, res.Runs)
	}
}

// TestAnotherViolationIsNotTheBug: a smaller case that fails with another
// signature does not count.
func TestAnotherViolationIsNotTheBug(t *testing.T) {
	runs := 0
	res, err := Run(context.Background(), Options{Scenario: bigCase(20), Want: []string{"no-lost-event/lost"}, Tries: 1, Confirm: 1, MaxCandidates: 10, Run: fakeRun(nil, &runs)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 0 || len(res.Minimal.Workload.Sagas) != 20 {
		t.Fatalf("accepted %d, minimal %d orders", res.Accepted, len(res.Minimal.Workload.Sagas))
	}
}

// TestDroppingSagasMovesEveryPosition: a fault's orders trigger and an
// event trigger's fallback move with the kept sagas as AfterOrders does;
// an event trigger's own count (the n-th charge) stays; the original's
// triggers are not touched.
func TestDroppingSagasMovesEveryPosition(t *testing.T) {
	sc := bigCase(20)
	sc.Faults = []scenarios.Fault{
		{ID: "f1", Kind: "kill", Target: "payment", AfterOrders: 10, Trigger: &scenarios.Trigger{On: scenarios.TriggerOrders, Count: 10}},
		{ID: "f2", Kind: "kill", Target: "payment", Trigger: &scenarios.Trigger{On: scenarios.TriggerEffect, Proc: "world/gateway", F: "charge", Count: 3, Fallback: 16}},
	}
	keep := []int{0, 2, 4, 6, 8, 12, 14, 18} // five before 10, seven before 16
	got := withSagas(sc, keep)
	if f := got.Faults[0]; f.AfterOrders != 5 || f.Trigger.Count != 5 {
		t.Errorf("orders trigger: after_orders %d, count %d; want 5, 5", f.AfterOrders, f.Trigger.Count)
	}
	if tr := got.Faults[1].Trigger; tr.Count != 3 || tr.Fallback != 7 {
		t.Errorf("effect trigger: count %d, fallback %d; want 3, 7", tr.Count, tr.Fallback)
	}
	if sc.Faults[0].Trigger.Count != 10 || sc.Faults[1].Trigger.Fallback != 16 {
		t.Errorf("the original's triggers changed: %+v %+v", *sc.Faults[0].Trigger, *sc.Faults[1].Trigger)
	}
}
