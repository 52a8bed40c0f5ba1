package explore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// fakeRunner pretends to run a candidate: its coverage is a function of
// the scenario (each fault's kind, target and trigger decile, the cards of
// the workload), so it reacts to mutations as a real target would; how
// long a run takes varies from run to run, from a source the campaign does
// not see. A scenario with a kill of payment and a declined card "fails".
type fakeRunner struct {
	timing *rand.Rand
	clock  *time.Duration
	runs   int
	bug    bool
}

func (f *fakeRunner) Run(_ context.Context, c Candidate) (Result, error) {
	f.runs++
	d := time.Duration(1+f.timing.IntN(30)) * time.Second
	*f.clock += d
	set := map[string]bool{}
	n := max(1, len(c.Scenario.Workload.Sagas))
	declined := false
	for _, o := range c.Scenario.Workload.Sagas {
		if strings.Contains(string(o.Body), "decline") {
			declined = true
		}
	}
	killPayment := false
	for _, fl := range c.Scenario.Faults {
		set[fmt.Sprintf("step %s@%s | %d", fl.Kind, fl.Target, 10*fl.AfterOrders/n)] = true
		set["point-under x | "+fl.Kind] = true
		killPayment = killPayment || fl.Kind == "kill" && fl.Target == "payment"
	}
	var sig Signature
	for k := range set {
		sig = append(sig, k)
	}
	slices.Sort(sig)
	res := Result{Status: models.Valid, Signature: sig, Elapsed: d, RunDir: "runs/" + c.Name}
	if f.bug && killPayment && declined {
		res.Status, res.Violations = models.Invalid, []string{"all-or-nothing/email-without-approval"}
	}
	return res, nil
}

func campaignOf(t *testing.T, seed, timingSeed uint64, runs int, budget time.Duration, bug, keepGoing bool) (Report, []string) {
	t.Helper()
	var clock time.Duration
	r := &fakeRunner{timing: rand.New(rand.NewPCG(timingSeed, 1)), clock: &clock, bug: bug}
	rep, err := Run(context.Background(), Options{Mutator: testMutator(seed), Runner: r, MaxRuns: runs, Budget: budget, KeepGoing: keepGoing,
		Clock: func() time.Duration { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, rec := range rep.Records {
		list = append(list, rec.Name+" "+rec.Digest+" "+rec.Origin)
	}
	return rep, list
}

// TestCampaignChoicesAreAFunctionOfTheSeed: two campaigns with one seed
// make the same candidates — same scenarios, same origins — although their
// runs take different times and the budget cuts one short (its list is a
// prefix of the other's); another seed makes other candidates. Choices
// read the seed's one random source and the coverage runs reached, never
// the clock.
func TestCampaignChoicesAreAFunctionOfTheSeed(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 25
	}
	_, a := campaignOf(t, 7, 1, n, 0, false, true)
	_, b := campaignOf(t, 7, 2, n, 0, false, true)
	if len(a) != n || !slices.Equal(a, b) {
		t.Fatalf("same seed, other run times: candidate lists differ\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	cut, c := campaignOf(t, 7, 3, n, time.Duration(n)*5*time.Second, false, true)
	if cut.Stopped != "budget" || len(c) == 0 || len(c) >= n || !slices.Equal(c, a[:len(c)]) {
		t.Fatalf("a budget-cut campaign (%s, %d runs) is not a prefix of the full one", cut.Stopped, len(c))
	}
	_, d := campaignOf(t, 8, 1, n, 0, false, true)
	if slices.Equal(a, d) {
		t.Fatal("seeds 7 and 8 made the same candidates")
	}
	fresh, mutants := 0, 0
	for _, l := range a {
		if strings.Contains(l, " fresh seed ") {
			fresh++
		} else {
			mutants++
		}
	}
	if fresh == 0 || mutants < n/2 {
		t.Errorf("%d fresh and %d mutants in %d candidates", fresh, mutants, n)
	}
}

// TestCampaignKeepsWhatReachedSomethingNew: the corpus holds exactly the
// runs that reached a feature first; coverage only grows.
func TestCampaignKeepsWhatReachedSomethingNew(t *testing.T) {
	rep, _ := campaignOf(t, 11, 1, 40, 0, false, true)
	kept, last := 0, 0
	for _, r := range rep.Records {
		if r.Kept != (r.New > 0) {
			t.Errorf("%s: kept %v with %d new features", r.Name, r.Kept, r.New)
		}
		if r.Kept {
			kept++
		}
		if r.Coverage < last {
			t.Errorf("%s: coverage fell from %d to %d", r.Name, last, r.Coverage)
		}
		last = r.Coverage
	}
	if kept != len(rep.Corpus) || kept < 2 || rep.Coverage.Len() != last {
		t.Errorf("kept %d, corpus %d, coverage %d/%d", kept, len(rep.Corpus), rep.Coverage.Len(), last)
	}
}

// TestCampaignStopsAtTheFirstViolation, or keeps going and groups them.
func TestCampaignStopsAtTheFirstViolation(t *testing.T) {
	rep, _ := campaignOf(t, 5, 1, 400, 0, true, false)
	if rep.Stopped != "violation" || rep.First == nil || rep.Records[len(rep.Records)-1].Name != rep.First.Name {
		t.Fatalf("stopped %q after %d runs, first %+v", rep.Stopped, len(rep.Records), rep.First)
	}
	all, _ := campaignOf(t, 5, 1, len(rep.Records)+60, 0, true, true)
	if all.Stopped != "runs" || len(all.Violations) != 1 {
		t.Fatalf("keep-going: stopped %q, violation groups %v", all.Stopped, all.Violations)
	}
	for k, v := range all.Violations {
		if k != "all-or-nothing/email-without-approval" || len(v) < 1 || v[0].Name != rep.First.Name {
			t.Errorf("group %q: %d runs, first %s (stop-at-first found %s)", k, len(v), v[0].Name, rep.First.Name)
		}
	}
}

// TestAdaptiveFreshShare: with AdaptiveFresh the share of fresh draws
// follows what fresh draws and mutants have each added per run, between
// 25 % and 90 %; without it, or before any run, it is FreshPercent.
func TestAdaptiveFreshShare(t *testing.T) {
	for _, c := range []struct {
		name                                       string
		adaptive                                   bool
		freshRuns, freshNew, mutantRuns, mutantNew int
		want                                       int
	}{
		{"fixed", false, 3, 300, 10, 30, 25},
		{"no runs yet", true, 0, 0, 0, 0, 25},
		{"fresh draws add more", true, 3, 300, 10, 30, 90},
		{"mutants add more", true, 2, 0, 10, 200, 25},
		{"even", true, 5, 50, 5, 50, 50},
		{"fresh somewhat better", true, 4, 120, 8, 80, 72},
		{"nothing new anywhere", true, 4, 0, 8, 0, 25},
	} {
		camp := &campaign{o: Options{FreshPercent: 25, AdaptiveFresh: c.adaptive},
			freshRuns: c.freshRuns, freshNew: c.freshNew, mutantRuns: c.mutantRuns, mutantNew: c.mutantNew}
		if got := camp.freshShare(); got != c.want {
			t.Errorf("%s: fresh share %d%%, want %d%%", c.name, got, c.want)
		}
	}
}
