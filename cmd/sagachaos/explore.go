package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/explore"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/reports"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Files of a campaign directory.
const (
	exploreJournal = "candidates.jsonl"
	exploreSummary = "campaign.json"
	explorePage    = "explore.html"
)

// defaultExploreScenario is the general-purpose scenario a campaign draws
// fresh candidates from: swarm where this build has it, else everything.
func defaultExploreScenario() string {
	if slices.Contains(scenarios.Names(), "swarm") {
		return "swarm"
	}
	return "everything"
}

func cmdExplore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		targetName = fs.String("target", "reference", "target: a name under targets/ or a manifest .json path")
		mutant     = fs.String("mutant", "", "switch on a planted bug (sagachaos list mutants)")
		scenario   = fs.String("scenario", defaultExploreScenario(), "the scenario spec fresh candidates are drawn from (a name or a spec .json of ranges)")
		seed       = fs.Uint64("seed", 1, "campaign seed: every choice of the campaign comes from it")
		budget     = fs.Duration("budget", 30*time.Minute, "bound the campaign's wall time (a run still going then is stopped and not counted)")
		maxRuns    = fs.Int("runs", 0, "bound the candidates run (0: only the budget)")
		corpusDir  = fs.String("corpus", "", "corpus directory: its scenario.json files run first, new entries are added to it (default: corpus/ in the campaign directory)")
		out        = fs.String("out", "explore", "directory for campaign directories")
		keepGoing  = fs.Bool("keep-going", false, "run on after a violation, grouping violations by signature")
		keepRuns   = fs.Bool("keep-runs", false, "keep the run directory of every run (default: valid runs that reached nothing new are removed)")
		fresh      = fs.String("fresh", "25", "percent of candidates drawn fresh from the generator once the corpus has entries, or auto: follow what fresh draws and mutants have each added so far (25-90)")
		timeLimit  = fs.Duration("time-limit", 0, "bound each run's workload phase (default: the scenario's)")
		scale      = fs.Float64("scale", 1, "scale the fresh candidates as run --scale does: the number of sagas, the workload's duration, the faults and rounds (0.25: shorter runs, more of them in a budget)")
		verbose    = fs.Bool("v", false, "log the harness's phases to stderr")
		health     = fs.Duration("health-timeout", 30*time.Second, "how long each component may take to become healthy")
	)
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if fs.NArg() > 0 {
		return fail(2, "explore: unexpected argument %q", fs.Arg(0))
	}
	if *budget <= 0 && *maxRuns <= 0 {
		return fail(2, "explore: give a positive --budget or --runs")
	}
	freshPercent, adaptive := 25, *fresh == "auto"
	if !adaptive {
		n, err := strconv.Atoi(*fresh)
		if err != nil || n < 1 || n > 100 {
			return fail(2, "explore: --fresh %q is not auto or a percentage in 1..100", *fresh)
		}
		freshPercent = n
	}
	m, err := target.Find(*targetName)
	if err != nil {
		return fail(2, "%v", err)
	}
	spec, exact, err := loadScenarioArg(*scenario)
	if err != nil {
		return fail(2, "%v", err)
	}
	if exact != nil {
		return fail(2, "explore: --scenario %s is a concrete scenario; a campaign draws from a spec of ranges (put concrete scenarios in a --corpus directory)", *scenario)
	}
	if *scale <= 0 {
		return fail(2, "explore: --scale %v: want a positive factor", *scale)
	}
	spec = spec.Scaled(*scale)
	if err := target.ValidateMutant(m, *mutant); err != nil {
		return fail(2, "%v", err)
	}
	started := time.Now()
	label := m.Name
	if *mutant != "" {
		label += "-" + *mutant
	}
	dir := filepath.Join(*out, fmt.Sprintf("%s-%s-%s-s%d", started.UTC().Format("20060102T150405"), label, spec.Name, *seed))
	if *corpusDir == "" {
		*corpusDir = filepath.Join(dir, "corpus")
	}
	initial, err := explore.LoadCorpus(*corpusDir)
	if err != nil {
		return fail(2, "%v", err)
	}
	fmt.Fprintf(stderr, "building target %s …\n", m.Name)
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		return fail(2, "%v", err)
	}
	cat := target.Catalog(m, fps)
	if err := spec.CheckAgainst(*scenario, cat); err != nil {
		return fail(2, "%v", err)
	}
	for _, e := range initial {
		if err := explore.ValidFor(cat, e.Scenario); err != nil {
			return fail(2, "%s: %v", e.File, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(2, "explore: %v", err)
	}
	journal, err := os.Create(filepath.Join(dir, exploreJournal))
	if err != nil {
		return fail(2, "explore: %v", err)
	}
	defer journal.Close()

	replay := func(runDir string) string {
		return runstore.Replay{Target: *targetName, Mutant: *mutant, Scenario: filepath.Join(runDir, runstore.ScenarioFile), Exact: true, TimeLimit: *timeLimit, Flags: ef.args()}.Line()
	}
	mut := &explore.Mutator{Spec: spec, Catalog: cat, Rand: explore.NewRand(*seed)}
	live := newExploreLine(stderr, isTerminal(stderr))
	base := harness.Options{Manifest: m, Mutant: *mutant, Env: ef.config(), Logger: newLogger(stderr, *verbose), Bin: bin, HealthTimeout: *health, Status: live.runStatus}
	runner := &explore.HarnessRunner{Base: base, Dir: filepath.Join(dir, "runs"), Replay: replay, KeepRuns: *keepRuns}
	if *timeLimit > 0 {
		runner.Tune = func(sc *scenarios.Scenario) { sc.Limits.TimeLimit = scenarios.Duration(*timeLimit) }
	}
	saver := explore.Saver{Dir: *corpusDir, Prefix: fmt.Sprintf("s%d-", *seed), Target: m.Name, TargetPath: target.ManifestPath(m), Mutant: *mutant}
	page := func(rep explore.Report, elapsed time.Duration, stopped string) {
		_ = writeExplorePage(dir, rep, reports.ExplorePage{Target: m.Name, Mutant: *mutant, Scenario: spec.Name, Seed: *seed, Budget: *budget,
			Elapsed: elapsed.Truncate(time.Second), Stopped: stopped, Started: started.UTC().Format(time.RFC3339)}, replay)
	}
	var (
		mu      sync.Mutex
		partial explore.Report
	)
	fmt.Fprintf(stderr, "explore %s%s: scenario %s, campaign seed %d, budget %v%s; campaign directory %s\n", m.Name, mutantSuffix(*mutant), spec.Name, *seed, *budget,
		runsSuffix(*maxRuns), dir)
	if len(initial) > 0 {
		fmt.Fprintf(stderr, "corpus %s: %d entries run first\n", *corpusDir, len(initial))
	}
	live.start()
	rep, err := explore.Run(ctx, explore.Options{
		Mutator: mut, Runner: runner, Budget: *budget, MaxRuns: *maxRuns, KeepGoing: *keepGoing, Initial: initial, FreshPercent: freshPercent, AdaptiveFresh: adaptive,
		Keep: saver.Save,
		Journal: func(r explore.Record) {
			b, _ := json.Marshal(r)
			journal.Write(append(b, '\n'))
			mu.Lock()
			partial.Records = append(partial.Records, r)
			snapshot := partial
			mu.Unlock()
			page(snapshot, time.Since(started), "running")
		},
		Progress: live.progress,
	})
	live.stop()
	elapsed := time.Since(started)
	if err != nil && rep.Stopped != "interrupted" {
		page(rep, elapsed, "error: "+oneLine(err))
		return fail(2, "explore: %v", err)
	}
	stopped := rep.Stopped
	page(rep, elapsed, stopped)
	_ = runstore.WriteJSON(filepath.Join(dir, exploreSummary), summaryOf(rep, m.Name, *mutant, spec.Name, *seed, *budget, elapsed))

	viol := 0
	for _, v := range rep.Violations {
		viol += len(v)
	}
	fmt.Fprintf(stdout, "explore: %d runs in %v (stopped: %s); corpus %d entries in %s; coverage %d features; %d violating runs\n",
		len(rep.Records), elapsed.Truncate(time.Second), stopped, len(rep.Corpus), *corpusDir, rep.Coverage.Len(), viol)
	keys := make([]string, 0, len(rep.Violations))
	for k := range rep.Violations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rs := rep.Violations[k]
		names := make([]string, len(rs))
		for i, r := range rs {
			names[i] = r.Name
		}
		fmt.Fprintf(stdout, "  %s: %d runs (%s)\n", k, len(rs), strings.Join(names, ", "))
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, explorePage))
	if rep.First != nil {
		fmt.Fprintf(stdout, "first violation: %s after %.0fs (%s), run directory %s\n", rep.First.Name, rep.First.AtSeconds, strings.Join(rep.First.Violations, ", "), rep.First.RunDir)
		fmt.Fprintf(stdout, "replay the exact scenario.json: %s\n", runstore.Replay{RunDir: rep.First.RunDir}.Line())
		fmt.Fprintf(stdout, "run it again: %s\n", replay(rep.First.RunDir))
		return &exitError{code: 1}
	}
	if stopped == "interrupted" {
		fmt.Fprintln(stderr, "sagachaos: interrupted; the campaign directory says what ran")
		return &exitError{code: 2}
	}
	return nil
}

func mutantSuffix(m string) string {
	if m == "" {
		return ""
	}
	return " --mutant " + m
}

func runsSuffix(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", at most %d runs", n)
}

// exploreSummaryFile is campaign.json.
type exploreSummaryFile struct {
	Target     string              `json:"target"`
	Mutant     string              `json:"mutant,omitempty"`
	Scenario   string              `json:"scenario"`
	Seed       uint64              `json:"seed"`
	Budget     string              `json:"budget"`
	Elapsed    string              `json:"elapsed"`
	Stopped    string              `json:"stopped"`
	Runs       int                 `json:"runs"`
	Corpus     []string            `json:"corpus"`
	Coverage   map[string]int      `json:"coverage"`
	Features   int                 `json:"features"`
	Violations map[string][]string `json:"violations,omitempty"`
	FirstAt    float64             `json:"first_violation_at_s,omitempty"`
	First      string              `json:"first_violation,omitempty"`
}

func summaryOf(rep explore.Report, tgt, mutant, spec string, seed uint64, budget, elapsed time.Duration) exploreSummaryFile {
	s := exploreSummaryFile{Target: tgt, Mutant: mutant, Scenario: spec, Seed: seed, Budget: budget.String(), Elapsed: elapsed.Truncate(time.Second).String(),
		Stopped: rep.Stopped, Runs: len(rep.Records), Coverage: rep.Coverage.ByCategory(), Features: rep.Coverage.Len(), Violations: map[string][]string{}}
	for _, e := range rep.Corpus {
		s.Corpus = append(s.Corpus, e.File)
	}
	for k, rs := range rep.Violations {
		for _, r := range rs {
			s.Violations[k] = append(s.Violations[k], r.RunDir)
		}
	}
	if rep.First != nil {
		s.First, s.FirstAt = rep.First.RunDir, rep.First.AtSeconds
	}
	return s
}

// writeExplorePage renders explore.html from what the campaign knows so
// far (the page is rewritten after every run, so it can be watched).
func writeExplorePage(dir string, rep explore.Report, p reports.ExplorePage, replay func(string) string) error {
	href := func(runDir string) string {
		if runDir == "" {
			return ""
		}
		if _, err := os.Stat(filepath.Join(runDir, runstore.ReportFile)); err != nil {
			return ""
		}
		if rel, err := filepath.Rel(dir, filepath.Join(runDir, runstore.ReportFile)); err == nil {
			return rel
		}
		return ""
	}
	kept := map[string]explore.Record{}
	for _, r := range rep.Records {
		p.Runs = append(p.Runs, reports.ExploreRun{N: r.N, Name: r.Name, Origin: r.Origin, Status: r.Status, Violations: r.Violations, Err: r.Err,
			New: r.New, Kept: r.Kept, Coverage: r.Coverage, Corpus: r.Corpus, AtSeconds: r.AtSeconds, RunSeconds: r.RunSeconds, Href: href(r.RunDir)})
		if r.Kept {
			kept[r.Name] = r
		}
	}
	if rep.Coverage != nil {
		byCat := rep.Coverage.ByCategory()
		for _, c := range explore.Categories {
			p.Categories = append(p.Categories, reports.ExploreCount{Name: c, Count: byCat[c]})
		}
	}
	var top []reports.ExploreEntry
	for _, e := range rep.Corpus {
		sample := e.Added
		if len(sample) > 12 {
			sample = sample[:12]
		}
		top = append(top, reports.ExploreEntry{Name: e.Name, Origin: e.Origin, File: e.File, Added: len(e.Added), AtSeconds: e.At.Seconds(), Sample: sample, Href: href(kept[e.Name].RunDir)})
	}
	if len(rep.Corpus) == 0 {
		for _, r := range rep.Records {
			if r.Kept {
				top = append(top, reports.ExploreEntry{Name: r.Name, Origin: r.Origin, File: r.File, Added: r.New, AtSeconds: r.AtSeconds, Href: href(r.RunDir)})
			}
		}
	}
	p.Top = reports.SortTop(top, 15)
	keys := make([]string, 0, len(rep.Violations))
	for k := range rep.Violations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := reports.ExploreGroup{Signature: k}
		for _, r := range rep.Violations[k] {
			g.Runs = append(g.Runs, r.Name)
		}
		first := rep.Violations[k][0]
		g.Href, g.Replay = href(first.RunDir), runstore.Replay{RunDir: first.RunDir}.Line()
		p.Violations = append(p.Violations, g)
	}
	if len(rep.Violations) == 0 {
		for _, r := range rep.Records {
			if r.Status == "invalid" {
				p.Violations = append(p.Violations, reports.ExploreGroup{Signature: strings.Join(r.Violations, " + "), Runs: []string{r.Name}, Href: href(r.RunDir), Replay: runstore.Replay{RunDir: r.RunDir}.Line()})
			}
		}
	}
	p.Note = "Times are wall-clock on the machine that ran the campaign; runs are real target runs, one at a time."
	f, err := os.CreateTemp(dir, ".explore.html.tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := reports.WriteExplore(f, p); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_ = os.Chmod(f.Name(), 0o644)
	return os.Rename(f.Name(), filepath.Join(dir, explorePage))
}

// exploreLine is the campaign's progress for a person: on a terminal a
// live line redrawn every second (runs, corpus, coverage, violations,
// rate, what runs now); otherwise a plain line per finished run.
type exploreLine struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex
	p     explore.Progress
	phase string
	since time.Time
	begin time.Time
	done  chan struct{}
	wg    sync.WaitGroup
}

func newExploreLine(w io.Writer, tty bool) *exploreLine {
	return &exploreLine{w: w, tty: tty, done: make(chan struct{})}
}

func (l *exploreLine) runStatus(s harness.Status) {
	l.mu.Lock()
	l.phase = fmt.Sprintf("%s %d/%d", s.Phase, s.Invoked, s.Planned)
	l.mu.Unlock()
}

func (l *exploreLine) progress(p explore.Progress) {
	l.mu.Lock()
	l.p = p
	if p.Running != nil {
		l.phase, l.since = "setting up", time.Now()
	}
	l.mu.Unlock()
	if p.Last != nil && !l.tty {
		r := p.Last
		verdict := r.Status
		if r.Err != "" {
			verdict = "no verdict (" + r.Err + ")"
		}
		if len(r.Violations) > 0 {
			verdict += " " + strings.Join(r.Violations, ",")
		}
		kept := ""
		if r.Kept {
			kept = ", kept"
		}
		fmt.Fprintf(l.w, "%s %5.0fs %s in %.1fs: +%d features%s (coverage %d, corpus %d, violations %d) — %s\n",
			r.Name, r.AtSeconds, verdict, r.RunSeconds, r.New, kept, p.Coverage, p.Corpus, p.Violations, r.Origin)
	}
	if p.Last != nil && l.tty && (p.Last.Kept || p.Last.Status == "invalid") {
		l.mu.Lock()
		fmt.Fprintf(l.w, "\r\033[K%s +%d %s — %s\n", p.Last.Name, p.Last.New, p.Last.Status, p.Last.Origin)
		l.mu.Unlock()
	}
}

func (l *exploreLine) start() {
	l.begin = time.Now()
	if !l.tty {
		return
	}
	l.wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-tk.C:
				l.draw()
			}
		}
	})
}

func (l *exploreLine) draw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.p
	p.Elapsed = time.Since(l.begin)
	rate := 0.0
	if m := p.Elapsed.Minutes(); m > 0 {
		rate = float64(p.Runs) / m
	}
	now := ""
	if p.Running != nil {
		now = fmt.Sprintf("  now %s %s %s", p.Running.Name, l.phase, time.Since(l.since).Truncate(time.Second))
	}
	fmt.Fprintf(l.w, "\r\033[Kexplore %s/%s  runs %d (%.1f/min)  corpus %d  coverage %d  violations %d%s",
		p.Elapsed.Truncate(time.Second), p.Budget, p.Runs, rate, p.Corpus, p.Coverage, p.Violations, now)
}

func (l *exploreLine) stop() {
	close(l.done)
	l.wg.Wait()
	if l.tty {
		fmt.Fprint(l.w, "\r\033[K")
	}
}
