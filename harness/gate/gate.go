// Package gate is the self-test gate (DESIGN §9): every planted bug of a
// target must be caught by its intended checker within a bounded number of
// seeds, the correct target must never be flagged on any named scenario,
// and every declared failpoint must be reached (the failpoint × fault
// coverage matrix).
package gate

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// Options configure the gate.
type Options struct {
	Manifest *targets.Manifest
	Bin      string
	Failpts  []targets.Failpoint
	OutDir   string
	Env      harness.Options // Env, Logger and HealthTimeout are taken from here
	// Mutants to test (empty: every mutant in the manifest; NoMutants:
	// none, only the reference runs).
	Mutants   []string
	NoMutants bool
	// MutantSeeds bounds the seeds tried per mutant before it escapes.
	MutantSeeds int
	// DetectSeeds is how many seeds each mutant is run with to measure
	// time-to-detect (median and worst); 1 stops at the first catch.
	DetectSeeds int
	// Reference lists the scenarios the correct target runs (empty: every
	// named scenario), each with ReferenceSeeds seeds.
	Reference      []string
	ReferenceSeeds int
	// Scenarios, when set, replaces every mutant's own scenarios (the
	// manifest's) and the reference's: the general scenarios only
	// (`selftest --scenarios swarm,everything`), to show that the general
	// search catches each planted bug without a scenario tuned to it.
	Scenarios []string
	// Scale scales every scenario (--scale).
	Scale    float64
	Progress func(string)
}

// MutantResult is one row of the gate.
type MutantResult struct {
	Mutant   string
	Expected []string
	Caught   bool
	// FiredBy is the expected checker that fired (or, when none did, the
	// checkers that fired instead).
	FiredBy  string
	Scenario string
	// Detect are the wall times from run start to verdict of the catching
	// runs; Runs counts every run made for this mutant.
	Detect []time.Duration
	Runs   int
	Seeds  []uint64 // seeds tried
	// FirstSeed is the seed of the first catching run (0: escaped);
	// ToCatch is the wall time of every run made for the mutant up to and
	// including that one: how long the search took to find the bug.
	FirstSeed uint64
	ToCatch   time.Duration
	Err       string
}

// ReferenceResult is one correct-target run.
type ReferenceResult struct {
	Scenario string
	Seed     uint64
	Status   models.Status
	Wall     time.Duration
	Err      string
	Dir      string
}

// Report is the whole gate.
type Report struct {
	Mutants   []MutantResult
	Reference []ReferenceResult
	// NotApplicable are the named scenarios left out of the default
	// reference runs because they name a component, link or failpoint the
	// target does not have (the generator refuses them), with why.
	NotApplicable []SkippedScenario
	Coverage      Coverage
	// Branches is the branch × fault matrix of the target's markers over
	// every run of the gate.
	Branches Branches
	Wall     time.Duration
}

// SkippedScenario is a named scenario the gate did not run on the target.
type SkippedScenario struct {
	Scenario string
	Reason   string
}

// applicable splits the named scenarios into those the generator accepts
// for the target and those it refuses (a scenario written for another
// target's components: running it would only be an error).
func applicable(m *targets.Manifest, fps []targets.Failpoint) ([]string, []SkippedScenario) {
	cat := target.Catalog(m, fps)
	var run []string
	var skip []SkippedScenario
	for _, n := range scenarios.Names() {
		spec, err := scenarios.Load(n)
		if err == nil {
			err = spec.CheckAgainst(n, cat)
		}
		if err != nil {
			skip = append(skip, SkippedScenario{Scenario: n, Reason: err.Error()})
			continue
		}
		run = append(run, n)
	}
	return run, skip
}

// Passed reports whether the gate is green: every mutant caught by an
// expected checker, every reference run valid, every failpoint reached.
func (r Report) Passed() bool {
	for _, m := range r.Mutants {
		if !m.Caught {
			return false
		}
	}
	for _, x := range r.Reference {
		if x.Status != models.Valid {
			return false
		}
	}
	return len(r.Coverage.Unreached()) == 0 && len(r.Branches.Holes()) == 0
}

func (o Options) run(ctx context.Context, name, mutant string, seed uint64, dirs *[]string) (harness.Result, time.Duration, error) {
	spec, err := scenarios.Load(name)
	if err != nil {
		return harness.Result{}, 0, err
	}
	spec = spec.Scaled(o.Scale)
	sc, err := scenarios.Generate(spec, seed, target.Catalog(o.Manifest, o.Failpts))
	if err != nil {
		return harness.Result{}, 0, err
	}
	opts := o.Env
	opts.Manifest, opts.Mutant, opts.Scenario, opts.Bin = o.Manifest, mutant, sc, o.Bin
	label := "reference"
	if mutant != "" {
		label = mutant
	}
	opts.RunDir = filepath.Join(o.OutDir, fmt.Sprintf("%s-%s-%d", label, name, seed))
	rp := runstore.Replay{Target: o.Manifest.Name, Mutant: mutant, Scenario: name, Seed: seed}
	if o.Scale > 0 && o.Scale != 1 {
		rp.Flags = []string{"--scale", fmt.Sprint(o.Scale)}
	}
	opts.Repro = rp.Line()
	start := time.Now()
	res, err := harness.Run(ctx, opts)
	if err == nil {
		*dirs = append(*dirs, res.RunDir)
	}
	return res, time.Since(start), err
}

// Run runs the gate.
func Run(ctx context.Context, o Options) (Report, error) {
	start := time.Now()
	var rep Report
	var dirs []string
	say := func(format string, a ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, a...))
		}
	}
	if o.MutantSeeds < 1 {
		o.MutantSeeds = 5
	}
	if o.DetectSeeds < 1 {
		o.DetectSeeds = 1
	}
	if o.ReferenceSeeds < 1 {
		o.ReferenceSeeds = 1
	}
	want := map[string]bool{}
	for _, m := range o.Mutants {
		want[m] = true
	}
	for _, mu := range o.Manifest.Mutants {
		if o.NoMutants || (len(want) > 0 && !want[mu.Name]) {
			continue
		}
		mr := MutantResult{Mutant: mu.Name, Expected: mu.Checkers}
		fired := map[string]bool{}
		scs := mu.Scenarios
		if len(o.Scenarios) > 0 {
			scs = o.Scenarios
		}
	seeds:
		for seed := uint64(1); seed <= uint64(o.MutantSeeds); seed++ {
			for _, sc := range scs {
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				res, wall, err := o.run(ctx, sc, mu.Name, seed, &dirs)
				mr.Runs++
				mr.Seeds = append(mr.Seeds, seed)
				if mr.FirstSeed == 0 {
					mr.ToCatch += wall
				}
				if err != nil {
					mr.Err = err.Error()
					say("%s: %s seed %d: error: %v", mu.Name, sc, seed, err)
					continue
				}
				hit := ""
				for _, r := range res.Verdict.Results {
					if r.Status != models.Invalid {
						continue
					}
					fired[r.Checker] = true
					for _, e := range mu.Checkers {
						if r.Checker == e && hit == "" {
							hit = e
						}
					}
				}
				say("%s: %s seed %d: %s in %v", mu.Name, sc, seed, orDefault(hit, "escaped"), wall.Truncate(time.Millisecond))
				if hit != "" {
					if mr.FirstSeed == 0 {
						mr.FirstSeed = seed
					}
					mr.Caught, mr.FiredBy, mr.Scenario = true, hit, sc
					mr.Detect = append(mr.Detect, wall)
					if len(mr.Detect) >= o.DetectSeeds {
						break seeds
					}
					continue seeds
				}
			}
		}
		if !mr.Caught {
			var fs []string
			for f := range fired {
				fs = append(fs, f)
			}
			sort.Strings(fs)
			mr.FiredBy = strings.Join(fs, ",")
		}
		rep.Mutants = append(rep.Mutants, mr)
	}
	names := o.Reference
	if len(names) == 0 && len(o.Scenarios) > 0 {
		names = o.Scenarios
	}
	if len(names) == 0 {
		names, rep.NotApplicable = applicable(o.Manifest, o.Failpts)
		for _, x := range rep.NotApplicable {
			say("reference: %s not applicable to %s: %s", x.Scenario, o.Manifest.Name, firstLine(x.Reason))
		}
	}
	for _, sc := range names {
		for seed := uint64(1); seed <= uint64(o.ReferenceSeeds); seed++ {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			res, wall, err := o.run(ctx, sc, "", seed, &dirs)
			rr := ReferenceResult{Scenario: sc, Seed: seed, Status: res.Verdict.Status, Wall: wall, Dir: res.RunDir}
			if err != nil {
				rr.Err, rr.Status = err.Error(), models.Unknown
			}
			say("reference: %s seed %d: %s in %v", sc, seed, rr.Status, wall.Truncate(time.Millisecond))
			rep.Reference = append(rep.Reference, rr)
		}
	}
	var points []targets.Failpoint
	for _, fp := range o.Failpts {
		if !fp.IsMarker() {
			points = append(points, fp)
		}
	}
	cov, err := FailpointCoverage(dirs, points)
	if err != nil {
		return rep, err
	}
	rep.Coverage = cov
	rep.Branches = BranchCoverage(dirs, o.Failpts)
	rep.Wall = time.Since(start)
	return rep, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Write prints the gate's tables.
func (r Report) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tCAUGHT\tCHECKER\tSCENARIO\tFIRST-SEED\tTO-CATCH\tMEDIAN\tWORST\tRUNS\tSEEDS")
	caught := 0
	for _, m := range r.Mutants {
		c := "no"
		if m.Caught {
			c = "yes"
			caught++
		}
		med, worst := "-", "-"
		if len(m.Detect) > 0 {
			d := append([]time.Duration(nil), m.Detect...)
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			med, worst = d[len(d)/2].Truncate(100*time.Millisecond).String(), d[len(d)-1].Truncate(100*time.Millisecond).String()
		}
		fired := m.FiredBy
		if !m.Caught {
			fired = "want " + strings.Join(m.Expected, "|") + "; fired: " + orDefault(m.FiredBy, "none")
		}
		first, toCatch := "-", "-"
		if m.FirstSeed > 0 {
			first, toCatch = fmt.Sprint(m.FirstSeed), m.ToCatch.Truncate(100*time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.Mutant, c, fired, orDefault(m.Scenario, "-"), first, toCatch, med, worst, m.Runs, seedList(m.Seeds))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d/%d mutants caught by their intended checker\n\n", caught, len(r.Mutants))
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REFERENCE SCENARIO\tSEED\tVERDICT\tWALL")
	bad := 0
	for _, x := range r.Reference {
		st := string(x.Status)
		if x.Err != "" {
			st = "error: " + firstLine(x.Err)
		}
		if x.Status != models.Valid {
			bad++
			st += "  (" + x.Dir + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", x.Scenario, x.Seed, st, x.Wall.Truncate(100*time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d reference runs, %d not valid\n", len(r.Reference), bad)
	if len(r.NotApplicable) > 0 {
		var ns []string
		for _, x := range r.NotApplicable {
			ns = append(ns, x.Scenario)
		}
		fmt.Fprintf(w, "%d named scenarios not applicable to this target (they name components, links or failpoints it does not have): %s\n", len(ns), strings.Join(ns, ", "))
	}
	fmt.Fprintf(w, "\nfailpoint coverage:\n")
	r.Coverage.Write(w)
	if u := r.Coverage.Unreached(); len(u) > 0 {
		fmt.Fprintf(w, "UNREACHED failpoints (holes in the harness): %s\n", strings.Join(u, ", "))
	}
	if len(r.Branches.Rows) > 0 {
		fmt.Fprintf(w, "\nbranch × fault coverage (the target's markers):\n")
		r.Branches.Write(w)
		if h := r.Branches.Holes(); len(h) > 0 {
			fmt.Fprintf(w, "BRANCHES NEVER REACHED UNDER A FAULT (holes in the harness): %s\n", strings.Join(h, ", "))
		}
	}
	fmt.Fprintf(w, "\ngate wall time: %v — %s\n", r.Wall.Truncate(time.Second), map[bool]string{true: "PASS", false: "FAIL"}[r.Passed()])
}

func seedList(s []uint64) string {
	seen := map[uint64]bool{}
	var parts []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			parts = append(parts, fmt.Sprint(x))
		}
	}
	return strings.Join(parts, ",")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// WriteTSV writes one tab-separated line per mutant — mutant, caught
// (yes/no), the catching scenario, the first catching seed, the seconds to
// catch (every run up to it), runs made — for scripts that compare two
// gates (make bench: the general scenarios beside the focused ones).
func (r Report) WriteTSV(w io.Writer) {
	fmt.Fprintln(w, "mutant\tcaught\tscenario\tfirst_seed\tto_catch_s\truns")
	for _, m := range r.Mutants {
		c, first, secs := "no", "-", "-"
		if m.Caught {
			c, first, secs = "yes", fmt.Sprint(m.FirstSeed), fmt.Sprintf("%.1f", m.ToCatch.Seconds())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", m.Mutant, c, orDefault(m.Scenario, "-"), first, secs, m.Runs)
	}
}
