// Package shrink minimises a failing case: rapid redraws the scenario from
// the failing seed and shrinks it, and every candidate is a real run.
package shrink

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Options configure Run.
type Options struct {
	Spec    *scenarios.Spec
	Catalog scenarios.Catalog
	Seed    uint64
	// Tries: a candidate counts as failing if any of this many runs of it
	// is invalid (faults are timing-sensitive; one pass proves little).
	Tries int
	// Budget bounds the whole minimisation.
	Budget time.Duration
	// Base is used for every run; its Scenario and RunDir are set per try.
	Base harness.Options
	// Progress, when set, hears about each candidate.
	Progress func(string)
}

// Result is the smallest failing case found.
type Result struct {
	Minimal scenarios.Scenario
	RunDir  string // a failing run of the minimal case
	// Runs and Failures count the confirmation runs of the minimal case:
	// how reliably it fails.
	Runs, Failures int
	Candidates     int
}

// shrinkTB adapts rapid's TB to a CLI: rapid drives the generator and the
// shrinker; a failing property is recorded here instead of in *testing.T.
type shrinkTB struct {
	mu     sync.Mutex
	failed bool
	logs   []string
}

func (t *shrinkTB) Helper()                      {}
func (t *shrinkTB) Name() string                 { return "sagachaos-shrink" }
func (t *shrinkTB) Logf(format string, a ...any) { t.Log(fmt.Sprintf(format, a...)) }
func (t *shrinkTB) Log(a ...any) {
	t.mu.Lock()
	t.logs = append(t.logs, fmt.Sprint(a...))
	t.mu.Unlock()
}
func (t *shrinkTB) Skipf(string, ...any)           { panic(errSkip) }
func (t *shrinkTB) Skip(...any)                    { panic(errSkip) }
func (t *shrinkTB) SkipNow()                       { panic(errSkip) }
func (t *shrinkTB) Errorf(format string, a ...any) { t.Logf(format, a...); t.Fail() }
func (t *shrinkTB) Error(a ...any)                 { t.Log(a...); t.Fail() }
func (t *shrinkTB) Fatalf(format string, a ...any) { t.Logf(format, a...); t.FailNow() }
func (t *shrinkTB) Fatal(a ...any)                 { t.Log(a...); t.FailNow() }
func (t *shrinkTB) FailNow()                       { t.Fail(); panic(errFailNow) }
func (t *shrinkTB) Fail()                          { t.mu.Lock(); t.failed = true; t.mu.Unlock() }
func (t *shrinkTB) Failed() bool                   { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }

type sentinel string

const (
	errSkip    sentinel = "skip"
	errFailNow sentinel = "fail-now"
)

var rapidFlagsOnce sync.Once

// Run minimises a failing case: rapid redraws the scenario generator from
// the failing seed and shrinks it (fewer orders, fewer faults, smaller
// values), running the real target for every candidate. A candidate is
// accepted as failing only if one of Tries runs is invalid; the minimal case
// is then run Tries more times to say how reliably it fails.
func Run(ctx context.Context, so Options) (res Result, err error) {
	if so.Tries < 1 {
		so.Tries = 1
	}
	if so.Budget <= 0 {
		so.Budget = 10 * time.Minute
	}
	// rapid reads testing's flags (it asks testing.Short), which exist only
	// after testing.Init and read only after a Parse.
	rapidFlagsOnce.Do(func() {
		testing.Init()
		if !flag.Parsed() {
			_ = flag.CommandLine.Parse(nil)
		}
	})
	// rapid reads its knobs from flags; these make it start from exactly
	// the failing seed (its first case is Generate's Example for that
	// seed), check one case, keep fail files out of the user's tree and
	// stay within the budget.
	for k, v := range map[string]string{
		"rapid.seed": fmt.Sprint(so.Seed), "rapid.checks": "1", "rapid.nofailfile": "true",
		"rapid.shrinktime": so.Budget.String(),
	} {
		if err := flag.Set(k, v); err != nil {
			return res, fmt.Errorf("shrink: set %s: %w", k, err)
		}
	}
	gen := scenarios.ScenarioGen(so.Spec, so.Catalog)
	var (
		mu       sync.Mutex
		smallest *scenarios.Scenario
		smallDir string
	)
	runCase := func(sc scenarios.Scenario, label string) (bool, string) {
		for try := 0; try < so.Tries; try++ {
			o := so.Base
			o.Scenario = sc
			o.RunDir = filepath.Join(so.Base.OutDir, fmt.Sprintf("%s-%d-%s-%d", sc.Name, sc.Seed, label, try))
			r, err := harness.Run(ctx, o)
			if err == nil && r.Verdict.Status == models.Invalid {
				return true, r.RunDir
			}
		}
		return false, ""
	}
	tb := &shrinkTB{}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(sentinel); !ok {
					panic(p)
				}
			}
		}()
		rapid.Check(tb, func(t *rapid.T) {
			if ctx.Err() != nil {
				return
			}
			sc := gen.Draw(t, "scenario")
			sc.Seed = so.Seed
			mu.Lock()
			res.Candidates++
			n := res.Candidates
			mu.Unlock()
			if so.Progress != nil {
				so.Progress(fmt.Sprintf("candidate %d: %d sagas, %d faults", n, len(sc.Workload.Sagas), len(sc.Faults)))
			}
			failed, dir := runCase(sc, fmt.Sprintf("c%d", n))
			if failed {
				mu.Lock()
				if smallest == nil || size(sc) <= size(*smallest) {
					c := sc
					smallest, smallDir = &c, dir
				}
				mu.Unlock()
				// rapid accepts a smaller case only if it fails with the
				// same message at the same place: keep it constant (the
				// run dir is recorded above, not in the message).
				t.Fatalf("invalid verdict")
			}
		})
	}()
	if smallest == nil {
		return res, fmt.Errorf("shrink: the case did not fail again in %d tries: it is timing-sensitive; rerun it with more --shrink-tries", so.Tries)
	}
	res.Minimal, res.RunDir = *smallest, smallDir
	for i := 0; i < so.Tries; i++ {
		res.Runs++
		if ok, _ := runCase(res.Minimal, fmt.Sprintf("confirm%d", i)); ok {
			res.Failures++
		}
	}
	return res, nil
}

func size(sc scenarios.Scenario) int {
	n := len(sc.Workload.Sagas)*10 + len(sc.Faults)*100
	for _, o := range sc.Workload.Sagas {
		n += len(o.Body) / 16
	}
	return n
}
