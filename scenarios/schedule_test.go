package scenarios

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

func generateSeeds(t *testing.T, name string, seeds int) []Scenario {
	t.Helper()
	s, err := Load(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []Scenario
	for seed := 1; seed <= seeds; seed++ {
		sc, err := Generate(s, uint64(seed), testCatalog)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sc)
	}
	return out
}

// Positional faults of a scheduled scenario spread over the whole
// workload, not bunched at its start (rapid's integer draws favour small
// values: the older plans put 36% of their faults in the first tenth of
// the workload and none in the last fifth), and their windows cross the
// step timeout as often as not.
func TestScheduleSpreadsFaultsOverTheWorkload(t *testing.T) {
	var deciles [10]int
	var n, long, rounds int
	for _, sc := range generateSeeds(t, "everything", 150) {
		orders := len(sc.Workload.Sagas)
		for _, f := range sc.Faults {
			if f.Duration.D() > 2*time.Second {
				long++
			}
			if f.Trigger != nil || f.Kind == "failpoint" {
				continue
			}
			if f.Round < 1 {
				t.Fatalf("positional fault %s has no round", f.ID)
			}
			rounds = max(rounds, f.Round)
			deciles[min(9, f.AfterOrders*10/orders)]++
			n++
		}
	}
	t.Logf("positional faults by decile of the workload: %v (of %d); rounds up to %d", deciles, n, rounds)
	for i := 0; i < 9; i++ {
		if share := float64(deciles[i]) / float64(n); share < 0.04 || share > 0.2 {
			t.Errorf("decile %d holds %.0f%% of the faults: not spread over the workload", i, 100*share)
		}
	}
	if rounds < 4 {
		t.Errorf("at most %d rounds drawn from 3–6", rounds)
	}
	total := 0
	for _, sc := range generateSeeds(t, "everything", 150) {
		total += len(sc.Faults)
	}
	if share := float64(long) / float64(total); share < 0.3 {
		t.Errorf("only %.0f%% of the windows are longer than a 2s step timeout", 100*share)
	}
}

// The aimed faults of the general scenarios reach every step and every
// compensation of the saga, every record type a process consumes, and
// markers and failpoints; every trigger validates and survives
// scenario.json.
func TestAimedFaultsReachEverySagaMoment(t *testing.T) {
	aims := map[string]bool{}
	on := map[string]bool{}
	for _, sc := range generateSeeds(t, "swarm", 200) {
		for _, f := range sc.Faults {
			if f.Trigger == nil {
				continue
			}
			if err := f.Trigger.Validate(); err != nil {
				t.Fatalf("seed %d %s: %v", sc.Seed, f.ID, err)
			}
			if f.Kind == "failpoint" {
				t.Fatalf("an armed failpoint got an event trigger: %+v", f)
			}
			aims[f.Aim] = true
			on[f.Trigger.On] = true
		}
		b, _ := json.Marshal(sc)
		var back Scenario
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("seed %d: scenario.json does not load back: %v", sc.Seed, err)
		}
	}
	var want []string
	for _, st := range testCatalog.Saga.Steps {
		want = append(want, "step "+st.Name)
		if st.Compensation != nil && st.Kind != models.Pivot {
			want = append(want, "compensation "+st.Compensation.Name)
		}
	}
	want = append(want, "step charge declined", "consumes ReserveStock", "consumes CancelCharge", "marker orders.timeout.charging", "failpoint payment.after-charge")
	for _, w := range want {
		if !aims[w] {
			t.Errorf("no fault aimed at %q in 200 seeds", w)
		}
	}
	for _, k := range []string{TriggerEffect, TriggerRecord, TriggerFailpoint} {
		if !on[k] {
			t.Errorf("no %s trigger drawn", k)
		}
	}
}

// A swarm seed enables a subset of the fault kinds, the processes and the
// workload features, journals it in the scenario, and draws nothing it
// did not enable; it never arms a marker.
func TestSwarmEnablesASubsetAndJournalsIt(t *testing.T) {
	spec, _ := Load("swarm")
	all := len(slices.Compact(slices.Sorted(slices.Values(spec.Faults.Kinds))))
	var sizes []int
	featureOn := map[string]int{}
	for _, sc := range generateSeeds(t, "swarm", 100) {
		w := sc.Swarm
		if w == nil || len(w.Kinds) == 0 || len(w.Components) == 0 || len(w.Features) == 0 {
			t.Fatalf("seed %d: swarm draw %+v", sc.Seed, w)
		}
		sizes = append(sizes, len(w.Kinds))
		for _, f := range w.Features {
			featureOn[f]++
		}
		for _, f := range sc.Faults {
			if !slices.Contains(w.Kinds, f.Kind) {
				t.Fatalf("seed %d: fault %s of kind %s, not enabled (%v)", sc.Seed, f.ID, f.Kind, w.Kinds)
			}
			if f.Kind == "failpoint" {
				if strings.Contains(f.Target, "timeout") || strings.Contains(f.Target, "redelivered") {
					t.Fatalf("seed %d: a marker armed as a failpoint: %s", sc.Seed, f.Target)
				}
				comp := f.Params.(*faults.Failpoint).Component
				if !enabledInstance(w.Components, comp) {
					t.Fatalf("seed %d: failpoint on %s, not an enabled process (%v)", sc.Seed, comp, w.Components)
				}
			}
			if (f.Kind == "kill" || f.Kind == "pause") && !enabledInstance(w.Components, f.Target) {
				t.Fatalf("seed %d: %s of %s, not an enabled process (%v)", sc.Seed, f.Kind, f.Target, w.Components)
			}
		}
		declines := false
		for _, o := range sc.Workload.Sagas {
			declines = declines || strings.Contains(string(o.Body), "tok_decline")
		}
		if declines && !slices.Contains(w.Features, FeatureDeclines) {
			t.Fatalf("seed %d: declined cards with declines off", sc.Seed)
		}
	}
	slices.Sort(sizes)
	if sizes[0] == all && sizes[len(sizes)-1] == all {
		t.Fatal("every seed enabled every kind: not a swarm")
	}
	for _, f := range Features {
		if featureOn[f] < 20 || featureOn[f] > 90 {
			t.Errorf("feature %s on in %d of 100 seeds", f, featureOn[f])
		}
	}
}

func enabledInstance(procs []string, instance string) bool {
	for _, p := range procs {
		if instance == p || strings.HasPrefix(instance, p+"-") {
			return true
		}
	}
	return false
}

// A workload with a duration spreads each client's orders over it; races
// are drawn per order; Scaled shortens the run but not the windows.
func TestDurationRacesAndScale(t *testing.T) {
	spec, _ := Load("swarm")
	sc, err := Generate(spec, 4, testCatalog)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int]time.Duration{}
	races := 0
	for _, o := range sc.Workload.Sagas {
		per[o.Client] += o.Gap.D()
		if o.Concurrent > 0 || o.DuplicateAfter > 0 || o.Parallel || o.RetrySpread > 0 {
			races++
		}
	}
	for c, d := range per {
		if d < spec.Duration.D()/3 || d > 2*spec.Duration.D() {
			t.Errorf("client %d's gaps add up to %v, want about %v", c, d, spec.Duration.D())
		}
	}
	small := spec.Scaled(0.2)
	if small.Duration.D() != 6*time.Second || small.Sagas.Max != 40 || small.Faults.DurationMS != spec.Faults.DurationMS {
		t.Fatalf("Scaled(0.2): duration %v, orders %v, windows %v", small.Duration.D(), small.Sagas, small.Faults.DurationMS)
	}
	sc2, err := Generate(small, 4, testCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if sc2.Scale != 0.2 || len(sc2.Workload.Sagas) > 40 {
		t.Fatalf("scaled scenario: scale %v, %d orders", sc2.Scale, len(sc2.Workload.Sagas))
	}
	if spec.Scaled(1) != spec {
		t.Fatal("Scaled(1) is not the spec itself")
	}
	_ = races
}

// A scenario.json fault with a bad trigger does not load.
func TestBadTriggerRefused(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"id":"f1","kind":"kill","target":"a","trigger":{"on":"meteor","count":1}}`, `unknown trigger "meteor"`},
		{`{"id":"f1","kind":"kill","target":"a","trigger":{"on":"effect","count":1}}`, "names the provider"},
		{`{"id":"f1","kind":"kill","target":"a","trigger":{"on":"record","type":"X","count":0}}`, "below 1"},
	} {
		var f Fault
		err := json.Unmarshal([]byte(c.json), &f)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fault f1") {
			t.Errorf("%s: %v, want an error naming the fault and containing %q", c.json, err, c.want)
		}
	}
}
