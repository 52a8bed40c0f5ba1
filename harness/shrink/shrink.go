// Package shrink minimises a failing case. It works on the concrete
// scenario (scenario.json), not on rapid's bitstream: delta debugging
// (Zeller and Hildebrandt's ddmin) drops halves, then quarters, … then
// single faults and sagas, and a last pass simplifies what is left (one
// client, one relay, no duplicate submissions or retries, shorter fault
// windows). The sagas' request bodies are the target's domain, drawn from
// its manifest's template, and are kept as they are. Every candidate is a
// real run of the target, retried up to Tries times because faults are
// timing-sensitive, and the minimum is run Confirm more times to say how
// reliably it fails.
//
// Why not rapid's shrinker: it edits the draws of the generator from the
// start of its bitstream (removing groups, then lowering values draw by
// draw), so its first candidates change the first orders' customers and
// SKUs rather than the number of orders or faults, and with a few seconds
// per real run a budget of minutes is spent before the order count moves.
// A scenario reduced by ddmin is no longer a draw of the spec's generator
// at all (order 3 of 12 dropped is not a bitstream edit), so rapid cannot
// refine it either; the value pass does what rapid's value shrinking would,
// knowing which values matter. harness.Check (the go-test API) keeps
// rapid's shrinking: there the case is a draw and the property is the
// user's.
package shrink

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/explore"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Options configure Run.
type Options struct {
	// Scenario is the failing case, concrete.
	Scenario scenarios.Scenario
	// Want are the violation signatures (checker/kind) of the original
	// failure: a candidate fails only if its verdict has one of them (a
	// smaller case failing for another reason is another bug). Empty: any
	// invalid verdict.
	Want []string
	// Tries: a candidate counts as failing if any of this many runs of it
	// fails (default 1); a passing candidate costs all of them.
	Tries int
	// Confirm is how many times the minimum is run again to measure its
	// failure rate (default 3).
	Confirm int
	// MaxCandidates bounds the candidates (default 40): what a slow,
	// loaded machine gets through is the same as a fast one's, only later.
	MaxCandidates int
	// Budget bounds the wall time (default 10m); whichever bound comes
	// first ends the minimisation with the smallest failing case so far.
	Budget time.Duration
	// Base is used for every run; its Scenario and RunDir are set per try,
	// under Base.OutDir.
	Base harness.Options
	// Progress, when set, hears about each candidate.
	Progress func(string)
	// Run runs one case (default harness.Run); tests replace it.
	Run func(context.Context, harness.Options) (harness.Result, error)
}

// Result is the smallest failing case found.
type Result struct {
	Minimal scenarios.Scenario
	// RunDir is a failing run of the minimal case ("" if it is the
	// original, never reduced).
	RunDir string
	// Candidates counts the candidates tried (each up to Tries runs),
	// Accepted those that failed and became the new minimum; RunsMade all
	// runs, confirmation runs included.
	Candidates, Accepted, RunsMade int
	// Runs and Failures count the confirmation runs of the minimal case:
	// its observed failure rate is Failures/Runs.
	Runs, Failures int
	// Stopped says why it ended: "done" (nothing smaller failed),
	// "candidates", "budget" or "interrupted".
	Stopped string
}

// errStop ends the minimisation early (a bound was reached).
type errStop string

func (e errStop) Error() string { return string(e) }

type shrinker struct {
	o        Options
	ctx      context.Context
	deadline time.Time
	res      *Result
	best     scenarios.Scenario
}

// Run minimises o.Scenario.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Tries < 1 {
		o.Tries = 1
	}
	if o.Confirm < 1 {
		o.Confirm = 3
	}
	if o.MaxCandidates < 1 {
		o.MaxCandidates = 40
	}
	if o.Budget <= 0 {
		o.Budget = 10 * time.Minute
	}
	if o.Run == nil {
		o.Run = harness.Run
	}
	res := Result{Minimal: o.Scenario, Stopped: "done"}
	s := &shrinker{o: o, ctx: ctx, deadline: time.Now().Add(o.Budget), res: &res, best: o.Scenario}
	err := s.passes()
	if stop, ok := err.(errStop); ok {
		res.Stopped, err = string(stop), nil
	}
	if err != nil {
		return res, err
	}
	res.Minimal = s.best
	if ctx.Err() != nil {
		res.Stopped = "interrupted"
		return res, nil
	}
	for i := 0; i < o.Confirm && ctx.Err() == nil; i++ {
		res.Runs++
		failed, dir := s.runOnce(s.best, fmt.Sprintf("confirm%d", i+1))
		if failed {
			res.Failures++
			if res.RunDir == "" {
				res.RunDir = dir
			}
		}
	}
	return res, nil
}

func (s *shrinker) passes() error {
	// Faults first: a bug that needs none is found at once, and fewer
	// faults make every later run steadier.
	if len(s.best.Faults) > 0 {
		if _, err := s.try(withFaults(s.best, nil), "no faults"); err != nil {
			return err
		}
	}
	if err := s.ddmin("sagas", func() int { return len(s.best.Workload.Sagas) },
		func(keep []int) scenarios.Scenario { return withSagas(s.best, keep) }); err != nil {
		return err
	}
	if err := s.ddmin("faults", func() int { return len(s.best.Faults) },
		func(keep []int) scenarios.Scenario { return withFaults(s.best, keep) }); err != nil {
		return err
	}
	for _, v := range simplifications {
		c, ok := v.apply(s.best)
		if !ok {
			continue
		}
		if _, err := s.try(c, v.name); err != nil {
			return err
		}
	}
	return nil
}

// ddmin minimises the units of the current best (orders or faults) by
// Zeller's ddmin: with the units cut into k chunks, keep any chunk that
// fails alone, else any complement that fails, else cut finer; done when
// no single unit can be removed. At least one unit stays (the case with
// none was tried first, for faults; a case needs an order).
func (s *shrinker) ddmin(what string, count func() int, build func(keep []int) scenarios.Scenario) error {
	k := 2
	for {
		n := count()
		if n < 2 {
			return nil
		}
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		chunks := split(items, k)
		reduced := false
		for i, c := range chunks {
			ok, err := s.try(build(c), fmt.Sprintf("%s: chunk %d/%d, %d of %d", what, i+1, len(chunks), len(c), n))
			if err != nil {
				return err
			}
			if ok {
				k, reduced = max(k-1, 2), true
				break
			}
		}
		if !reduced && k > 2 {
			for i := range chunks {
				comp := complement(items, chunks[i])
				ok, err := s.try(build(comp), fmt.Sprintf("%s: all but chunk %d/%d, %d of %d", what, i+1, len(chunks), len(comp), n))
				if err != nil {
					return err
				}
				if ok {
					k, reduced = max(k-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if k >= n {
				return nil
			}
			k = min(2*k, n)
		}
	}
}

// try runs a candidate (up to Tries times) and makes it the minimum if it
// fails; it reports whether it did.
func (s *shrinker) try(cand scenarios.Scenario, label string) (bool, error) {
	switch {
	case s.ctx.Err() != nil:
		return false, errStop("interrupted")
	case s.res.Candidates >= s.o.MaxCandidates:
		return false, errStop("candidates")
	case time.Now().After(s.deadline):
		return false, errStop("budget")
	}
	s.res.Candidates++
	n := s.res.Candidates
	failed := false
	var dir string
	for t := 0; t < s.o.Tries && !failed && s.ctx.Err() == nil; t++ {
		failed, dir = s.runOnce(cand, fmt.Sprintf("c%d-%d", n, t+1))
	}
	verdict := "passed"
	if failed {
		verdict = "failed: the new minimum"
		s.best, s.res.RunDir = cand, dir
		s.res.Accepted++
	}
	if s.o.Progress != nil {
		s.o.Progress(fmt.Sprintf("candidate %d (%s): %d orders, %d faults — %s", n, label, len(cand.Workload.Sagas), len(cand.Faults), verdict))
	}
	return failed, nil
}

func (s *shrinker) runOnce(sc scenarios.Scenario, label string) (bool, string) {
	o := s.o.Base
	o.Scenario = sc
	o.RunDir = filepath.Join(s.o.Base.OutDir, fmt.Sprintf("%s-%d-%s", sc.Name, sc.Seed, label))
	s.res.RunsMade++
	r, err := s.o.Run(s.ctx, o)
	if err != nil || r.Verdict.Status != models.Invalid {
		return false, r.RunDir
	}
	if len(s.o.Want) == 0 {
		return true, r.RunDir
	}
	for _, res := range r.Verdict.Results {
		for _, v := range res.Violations {
			ch := v.Checker
			if ch == "" {
				ch = res.Checker
			}
			if slices.Contains(s.o.Want, ch+"/"+v.Kind) {
				return true, r.RunDir
			}
		}
	}
	return false, r.RunDir
}

// withSagas keeps the sagas at indices keep; every position a fault waits
// for (its order count, an orders trigger, an event trigger's fallback)
// moves so that it comes after the same kept sagas.
func withSagas(sc scenarios.Scenario, keep []int) scenarios.Scenario {
	out := sc
	out.Workload.Sagas = nil
	for _, i := range keep {
		out.Workload.Sagas = append(out.Workload.Sagas, sc.Workload.Sagas[i])
	}
	out.Faults = slices.Clone(sc.Faults)
	for j := range out.Faults {
		explore.MoveOrderTriggers(&out.Faults[j], func(p int) int {
			before := 0
			for _, i := range keep {
				if i < p {
					before++
				}
			}
			return before
		})
	}
	return out
}

// withFaults keeps the faults at indices keep (ids unchanged, so a
// minimum's faults still name the original's).
func withFaults(sc scenarios.Scenario, keep []int) scenarios.Scenario {
	out := sc
	out.Faults = nil
	for _, i := range keep {
		out.Faults = append(out.Faults, sc.Faults[i])
	}
	return out
}

// simplifications are the value pass: each makes one kind of value as
// simple as it gets, for the whole case at once.
var simplifications = []struct {
	name  string
	apply func(scenarios.Scenario) (scenarios.Scenario, bool)
}{
	{"one client", func(sc scenarios.Scenario) (scenarios.Scenario, bool) {
		if sc.Workload.Clients <= 1 {
			return sc, false
		}
		out := sc
		out.Workload.Clients = 1
		out.Workload.Sagas = slices.Clone(sc.Workload.Sagas)
		for i := range out.Workload.Sagas {
			out.Workload.Sagas[i].Client = 0
		}
		return out, true
	}},
	{"one relay", func(sc scenarios.Scenario) (scenarios.Scenario, bool) {
		// The scenario's replica overrides are its relay processes'
		// (scenarios.Catalog.RelayReplicas), whatever the target calls them.
		many := false
		for _, n := range sc.Replicas {
			many = many || n > 1
		}
		if !many {
			return sc, false
		}
		for _, f := range sc.Faults {
			if aimsAtReplica(f, sc.Replicas) {
				return sc, false // the fault needs the other relays
			}
		}
		out := sc
		out.Replicas = map[string]int{}
		for k := range sc.Replicas {
			out.Replicas[k] = 1
		}
		return out, true
	}},
	{"single submissions, no retries", func(sc scenarios.Scenario) (scenarios.Scenario, bool) {
		out := sc
		out.Workload.Sagas = slices.Clone(sc.Workload.Sagas)
		changed := false
		for i := range out.Workload.Sagas {
			if p := &out.Workload.Sagas[i]; p.Submissions > 1 || p.RetryUnknown > 0 {
				p.Submissions, p.RetryUnknown, changed = 1, 0, true
			}
		}
		return out, changed
	}},
	{"no request races", func(sc scenarios.Scenario) (scenarios.Scenario, bool) {
		out := sc
		out.Workload.Sagas = slices.Clone(sc.Workload.Sagas)
		changed := false
		for i := range out.Workload.Sagas {
			p := &out.Workload.Sagas[i]
			if p.Concurrent > 0 || p.DuplicateAfter > 0 || p.Parallel || p.RetrySpread > 0 {
				p.Concurrent, p.DuplicateAfter, p.Parallel, p.RetrySpread, changed = 0, 0, false, 0, true
			}
		}
		return out, changed
	}},
	{"half the fault windows", func(sc scenarios.Scenario) (scenarios.Scenario, bool) {
		out := sc
		out.Faults = slices.Clone(sc.Faults)
		changed := false
		for i := range out.Faults {
			if d := out.Faults[i].Duration; d >= scenarios.Duration(100*time.Millisecond) {
				out.Faults[i].Duration, changed = d/2, true
			}
		}
		return out, changed
	}},
}

// aimsAtReplica: a fault aimed at an instance other than the first of a
// replicated process (relay-2, or relay-3→kafka).
func aimsAtReplica(f scenarios.Fault, replicas map[string]int) bool {
	target := f.Target
	if k, err := f.Spec(); err == nil {
		if a, ok := k.(faults.StartArmed); ok {
			target, _, _, _ = a.Arm(f.View())
		}
	}
	for name, n := range replicas {
		for i := 2; i <= n; i++ {
			in := scenarios.Instances(name, n)[i-1]
			if target == in || strings.HasPrefix(target, in+"→") {
				return true
			}
		}
	}
	return false
}

// split cuts items into k chunks of near-equal size.
func split(items []int, k int) [][]int {
	k = min(k, len(items))
	var out [][]int
	for i := 0; i < k; i++ {
		lo, hi := i*len(items)/k, (i+1)*len(items)/k
		out = append(out, slices.Clone(items[lo:hi]))
	}
	return out
}

func complement(items, chunk []int) []int {
	var out []int
	for _, x := range items {
		if !slices.Contains(chunk, x) {
			out = append(out, x)
		}
	}
	return out
}
