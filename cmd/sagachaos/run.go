package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/explore"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/shrink"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// envFlags choose the environment's providers. No default is read from the
// environment here: a flag default is printed by --help and by every flag
// error, and SAGACHAOS_POSTGRES_DSN carries a password. env.Config.Resolve
// reads the variables instead; an explicit flag wins over them.
type envFlags struct {
	postgres, postgresDSN, kafka, kafkaBrokers string
	postgresImage, kafkaImage                  string
}

func (f *envFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.postgres, "postgres", "", "PostgreSQL provider: local (throwaway cluster from the local binaries), dsn, testcontainers (default: dsn if a DSN is given or env "+env.EnvPostgresDSN+" is set, else local)")
	fs.StringVar(&f.postgresDSN, "postgres-dsn", "", "server for --postgres dsn; giving it selects dsn (default: env "+env.EnvPostgresDSN+")")
	fs.StringVar(&f.kafka, "kafka", "", "Kafka provider: kfake (in process), brokers, testcontainers (default: brokers if brokers are given or env "+env.EnvKafkaBrokers+" is set, else kfake)")
	fs.StringVar(&f.kafkaBrokers, "kafka-brokers", "", "comma-separated brokers for --kafka brokers; giving them selects brokers (default: env "+env.EnvKafkaBrokers+")")
	fs.StringVar(&f.postgresImage, "postgres-image", env.DefaultPostgresImage, "image for --postgres testcontainers (no registry? scripts/pg-image.sh builds one)")
	fs.StringVar(&f.kafkaImage, "kafka-image", env.DefaultKafkaImage, "Redpanda image for --kafka testcontainers")
}

func (f *envFlags) config() env.Config {
	c := env.Config{Postgres: f.postgres, PostgresDSN: f.postgresDSN, Kafka: f.kafka, KafkaBrokers: env.SplitBrokers(f.kafkaBrokers),
		PostgresImage: f.postgresImage, KafkaImage: f.kafkaImage}
	if c.PostgresDSN != "" {
		c.PostgresDSNFrom = "--postgres-dsn"
	}
	if len(c.KafkaBrokers) > 0 {
		c.KafkaBrokersFrom = "--kafka-brokers"
	}
	return c
}

// args are the provider flags a replay line repeats (never a DSN: the line
// is printed and stored).
func (f *envFlags) args() []string {
	var a []string
	if f.postgres != "" {
		a = append(a, "--postgres", f.postgres)
	}
	if f.postgres == "testcontainers" && f.postgresImage != env.DefaultPostgresImage {
		a = append(a, "--postgres-image", f.postgresImage)
	}
	if f.kafka != "" {
		a = append(a, "--kafka", f.kafka)
	}
	if f.kafka == "testcontainers" && f.kafkaImage != env.DefaultKafkaImage {
		a = append(a, "--kafka-image", f.kafkaImage)
	}
	return a
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		targetName = fs.String("target", "reference", "target: a name under targets/ or a manifest .json path")
		mutant     = fs.String("mutant", "", "switch on a planted bug (sagachaos list mutants)")
		scenario   = fs.String("scenario", "everything", "named scenario (sagachaos list scenarios), a scenario .json file of ranges, or a concrete scenario.json (a run's, a corpus entry of explore) that runs as written")
		seed       = fs.Uint64("seed", 1, "seed of the run")
		seeds      = fs.String("seeds", "", "many seeds: 1-50, 1,4,9-12 (overrides --seed)")
		shard      = fs.String("shard", "", "run only shard i/n of the seeds")
		out        = fs.String("out", "runs", "directory for run directories")
		timeLimit  = fs.Duration("time-limit", 0, "bound the workload phase (default: the scenario's)")
		doShrink   = fs.Bool("shrink", false, "on a violation, minimise the failing case (delta debugging of its orders and faults, then a value pass; every candidate a real run)")
		shrinkTry  = fs.Int("shrink-tries", 2, "with --shrink: the re-try budget per candidate: it counts as failing if one of this many runs fails")
		shrinkMax  = fs.Int("shrink-candidates", 40, "with --shrink: bound the candidates tried")
		shrinkConf = fs.Int("shrink-confirm", 3, "with --shrink: run the minimal case this many more times for its observed failure rate")
		shrinkTime = fs.Duration("shrink-budget", 10*time.Minute, "with --shrink: bound the minimisation's wall time")
		verbose    = fs.Bool("v", false, "log the harness's phases to stderr")
		health     = fs.Duration("health-timeout", 30*time.Second, "how long each component may take to become healthy")
		keep       = fs.String("keep", "", "run directories to keep: failing (default with --seeds: a valid run leaves only its line in OUT/summary.jsonl) or all")
		planOnly   = fs.Bool("plan", false, "print each seed's generated scenario (scenario.json: workload, fault plan, triggers, swarm) and exit without running")
		scale      = fs.Float64("scale", 1, "scale the run: the number of sagas, the workload's duration and the number of faults and rounds (e.g. 0.2 for CI and laptops; windows stay as long)")
	)
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	log := newLogger(stderr, *verbose)
	m, err := target.Find(*targetName)
	if err != nil {
		return fail(2, "%v", err)
	}
	spec, exact, err := loadScenarioArg(*scenario)
	if err != nil {
		return fail(2, "%v", err)
	}
	if *scale <= 0 {
		return fail(2, "--scale %v: want a positive factor", *scale)
	}
	if spec != nil {
		spec = spec.Scaled(*scale)
	}
	flags := ef.args()
	if *scale != 1 {
		flags = append(flags, "--scale", strconv.FormatFloat(*scale, 'g', -1, 64))
	}
	if err := target.ValidateMutant(m, *mutant); err != nil {
		return fail(2, "%v", err)
	}
	if exact != nil {
		seedSet := false
		fs.Visit(func(f *flag.Flag) {
			seedSet = seedSet || f.Name == "seed" || f.Name == "seeds" || f.Name == "shard" || f.Name == "scale"
		})
		if seedSet {
			return fail(2, "--scenario %s is a concrete scenario: it runs as written, with no seed to draw (drop --seed/--seeds/--scale; to rerun it N times: sagachaos repro RUN_DIR --times N)", *scenario)
		}
		*seed = exact.Seed
	}
	list := []uint64{*seed}
	if *seeds != "" {
		if list, err = scenarios.ParseSeeds(*seeds); err != nil {
			return fail(2, "%v", err)
		}
	}
	if list, err = scenarios.Shard(list, *shard); err != nil {
		return fail(2, "%v", err)
	}
	if *keep == "" {
		*keep = keepAll
		if *seeds != "" {
			*keep = keepFailing
		}
	}
	if *keep != keepAll && *keep != keepFailing {
		return fail(2, "--keep %q: want failing or all", *keep)
	}
	fmt.Fprintf(stderr, "building target %s …\n", m.Name)
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		return fail(2, "%v", err)
	}
	cat := target.Catalog(m, fps)
	worst := -1
	var sw *sweep
	if *seeds != "" && !*planOnly {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fail(2, "%v", err)
		}
		sw = newSweep(*out, *keep, *seeds, *shard, len(list), stdout, stderr)
	}
	for _, s := range list {
		var sc scenarios.Scenario
		if exact != nil {
			sc = *exact
			if err := explore.ValidFor(cat, sc); err != nil {
				return fail(2, "%s: %v", *scenario, err)
			}
		} else if sc, err = scenarios.Generate(spec, s, cat); err != nil {
			return fail(2, "%v", err)
		}
		if *timeLimit > 0 {
			sc.Limits.TimeLimit = scenarios.Duration(*timeLimit)
		}
		if *planOnly {
			b, _ := json.MarshalIndent(sc, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		repro := runstore.Replay{Target: *targetName, Mutant: *mutant, Scenario: *scenario, Exact: exact != nil, Seed: s, TimeLimit: *timeLimit, Flags: flags}.Line()
		o := harness.Options{Manifest: m, Mutant: *mutant, Scenario: sc, OutDir: *out, Env: ef.config(), Repro: repro, Logger: log, Bin: bin, HealthTimeout: *health}
		var code int
		var v models.Verdict
		if sw != nil {
			code, v = sweepOne(ctx, sw, s, o)
		} else {
			code, v = runOneVerdict(ctx, o, stdout, stderr)
		}
		worst = worse(worst, code)
		if code == 1 && *doShrink {
			shrinkCase(ctx, sc, explore.ViolationKeys(v), shrink.Options{Tries: *shrinkTry, MaxCandidates: *shrinkMax, Confirm: *shrinkConf, Budget: *shrinkTime,
				Base: harness.Options{Manifest: m, Mutant: *mutant, OutDir: filepath.Join(*out, "shrink"), Env: ef.config(), Logger: log, Bin: bin, HealthTimeout: *health}}, stdout, stderr)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if *planOnly {
		return nil
	}
	if sw != nil {
		sw.finish(ctx.Err() != nil)
	}
	if worst == 0 {
		return nil
	}
	return &exitError{code: worst}
}

// worse orders exit codes by what a CI gate must see first: a violation,
// then an error, then unknown, then valid.
func worse(a, b int) int {
	rank := map[int]int{-1: -1, 0: 0, 3: 1, 2: 2, 1: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// sweepOne runs one case of a --seeds sweep; the sweep prints its line.
// It returns the exit code and the verdict (what --shrink minimises).
func sweepOne(ctx context.Context, sw *sweep, seed uint64, o harness.Options) (int, models.Verdict) {
	sw.begin(seed)
	if sw.tty {
		o.Status = sw.status(seed)
	}
	t0 := time.Now()
	res, err := harness.Run(ctx, o)
	return sw.record(seed, res, err, time.Since(t0)), res.Verdict
}

// loadScenarioArg reads --scenario: a concrete scenario.json (returned as
// exact: it runs as written) or a spec of ranges, by name or file.
func loadScenarioArg(arg string) (*scenarios.Spec, *scenarios.Scenario, error) {
	if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, '/') {
		sf, err := runstore.ReadScenarioFile(arg)
		switch {
		case err == nil:
			return nil, &sf.Scenario, nil
		case !errors.Is(err, runstore.ErrNotConcrete) && !errors.Is(err, os.ErrNotExist):
			return nil, nil, err
		}
	}
	spec, err := scenarios.Load(arg)
	return spec, nil, err
}

// runOne runs one case and prints its summary; it returns the exit code.
func runOne(ctx context.Context, o harness.Options, stdout, stderr io.Writer) int {
	code, _ := runOneVerdict(ctx, o, stdout, stderr)
	return code
}

// runOneVerdict is runOne that also returns the verdict.
func runOneVerdict(ctx context.Context, o harness.Options, stdout, stderr io.Writer) (int, models.Verdict) {
	tty := isTerminal(stderr)
	if tty {
		o.Status = func(s harness.Status) {
			faults := "none"
			if len(s.Faults) > 0 {
				faults = strings.Join(s.Faults, " ")
			}
			fmt.Fprintf(stderr, "\r\033[K%-9s orders %d/%d  ops %d  crashes %d  faults %s  %s",
				s.Phase, s.Invoked, s.Planned, s.Ops, s.Crashes, faults, s.Elapsed.Truncate(time.Second))
		}
	} else {
		fmt.Fprintf(stderr, "run %s seed %d: %d sagas, %d faults\n", o.Scenario.Name, o.Scenario.Seed, len(o.Scenario.Workload.Sagas), len(o.Scenario.Faults))
	}
	res, err := harness.Run(ctx, o)
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		if errors.Is(err, harness.ErrInterrupted) {
			fmt.Fprintf(stderr, "sagachaos: interrupted; partial run in %s (no process left behind)\n", res.RunDir)
		} else {
			fmt.Fprintf(stderr, "sagachaos: %v\n", oneLine(err))
		}
		return 2, res.Verdict
	}
	_ = reports.WriteTerminal(stdout, res.Verdict, filepath.Join(res.RunDir, "report.html"), tty && isTerminal(stdout))
	code := res.Verdict.Status.ExitCode()
	if code != 0 {
		fmt.Fprintf(stdout, "replay the exact scenario.json: %s\n", runstore.Replay{RunDir: res.RunDir}.Line())
	}
	return code, res.Verdict
}

func oneLine(err error) string {
	s := err.Error()
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func cmdRepro(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("repro", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory for the replays' run directories (default: next to the original)")
	until := fs.Int("until", 0, "rerun until the violation recurs, at most this many times, and report the rate")
	times := fs.Int("times", 0, "rerun exactly this many times and report how often the violation recurred")
	verbose := fs.Bool("v", false, "log the harness's phases to stderr")
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(reorderArgs(fs, args)); err != nil {
		return &exitError{code: 2}
	}
	if fs.NArg() != 1 {
		return fail(2, "repro: want one RUN_DIR (or a scenario.json file)")
	}
	if *until < 0 || *times < 0 || *until > 0 && *times > 0 {
		return fail(2, "repro: give --until N or --times N (N ≥ 1), not both")
	}
	dir, sf, err := reproSource(fs.Arg(0))
	if err != nil {
		return fail(2, "%v", err)
	}
	var m *targets.Manifest
	if sf.TargetPath != "" {
		if _, serr := os.Stat(sf.TargetPath); serr == nil {
			m, err = target.Find(sf.TargetPath)
		}
	}
	if m == nil {
		m, err = target.Find(sf.Target)
	}
	if err != nil {
		return fail(2, "%v", err)
	}
	bin, _, err := target.Prepare(ctx, m, "")
	if err != nil {
		return fail(2, "%v", err)
	}
	if *out == "" {
		*out = filepath.Dir(filepath.Clean(fs.Arg(0)))
		if dir != "" {
			*out = filepath.Dir(filepath.Clean(dir))
		}
	}
	// What the original showed: its violations (the recurrence to look
	// for) and its history (what the fidelity compares with).
	var want []string
	var orig *models.History
	if dir != "" {
		if v, err := reports.ReadVerdict(filepath.Join(dir, runstore.VerdictFile)); err == nil {
			want = explore.ViolationKeys(v)
		}
		orig, _ = models.ReadHistoryFile(filepath.Join(dir, runstore.HistoryFile))
	}
	replayOf := fs.Arg(0)
	if dir != "" {
		replayOf = dir
	}
	n := max(1, *until, *times)
	recurred, made := 0, 0
	worst := -1
	var rates []string
	for i := 1; i <= n && ctx.Err() == nil; i++ {
		o := harness.Options{Manifest: m, Mutant: sf.Mutant, Scenario: sf.Scenario, OutDir: *out, Env: ef.config(),
			Repro: runstore.Replay{RunDir: replayOf}.Line(), Logger: newLogger(stderr, *verbose), Bin: bin}
		suffix := "-repro"
		if n > 1 {
			suffix = fmt.Sprintf("-repro%d", i)
		}
		o.RunDir = filepath.Join(*out, runstore.DirName(sf.Scenario, time.Now())+suffix)
		if n > 1 {
			fmt.Fprintf(stdout, "replay %d of at most %d:\n", i, n)
		}
		code, v := runOneVerdict(ctx, o, stdout, stderr)
		made++
		worst = worse(worst, code)
		got := explore.ViolationKeys(v)
		again := v.Status == models.Invalid && (len(want) == 0 || intersects(got, want))
		if again {
			recurred++
		}
		if orig != nil {
			if h, err := models.ReadHistoryFile(filepath.Join(o.RunDir, runstore.HistoryFile)); err == nil {
				f := nemesis.CompareRuns(orig, h)
				fmt.Fprintln(stdout, f.Line())
				for _, d := range f.Differ {
					fmt.Fprintf(stdout, "  differs: %s\n", d)
				}
				for _, d := range f.StepsDiffer {
					fmt.Fprintf(stdout, "  sagas differ: %s\n", d)
				}
				for _, nf := range f.NeverFired {
					fmt.Fprintf(stdout, "  %s\n", nf)
				}
				rates = append(rates, fmt.Sprintf("replay %d: %s, %d/%d same effect, %d/%d same place, %d/%d same saga steps", i, orDefault(string(v.Status), "no verdict"), f.SameEffect, f.Faults, f.SamePlace, f.Faults, f.SameSteps, f.Faults))
			}
		}
		if *until > 0 && again {
			break
		}
	}
	if n > 1 {
		what := "the violation (" + strings.Join(want, ", ") + ")"
		if len(want) == 0 {
			what = "a violation"
		}
		fmt.Fprintf(stdout, "repro: %s recurred in %d of %d replays (rate %d/%d)", what, recurred, made, recurred, made)
		if *until > 0 && recurred > 0 {
			fmt.Fprintf(stdout, "; stopped at the first recurrence")
		}
		fmt.Fprintln(stdout)
		for _, r := range rates {
			fmt.Fprintf(stdout, "  %s\n", r)
		}
	}
	if ctx.Err() != nil {
		return &exitError{code: 2}
	}
	if n > 1 {
		// The answer is whether it recurred: 1 if it did, 0 if it never
		// did, 2 if a replay could not run at all and none recurred.
		switch {
		case recurred > 0:
			return &exitError{code: 1}
		case worst == 2:
			return &exitError{code: 2}
		}
		return nil
	}
	if worst == 0 {
		return nil
	}
	return &exitError{code: worst}
}

// reproSource reads what repro replays: a run directory (its scenario.json
// and, for the fidelity, its history) or a scenario.json file (a corpus
// entry; a run directory's own scenario.json counts as its directory).
func reproSource(arg string) (dir string, sf runstore.Scenario, err error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", sf, fmt.Errorf("read run dir: %w", err)
	}
	if st.IsDir() {
		sf, err = runstore.ReadScenario(arg)
		return arg, sf, err
	}
	sf, err = runstore.ReadScenarioFile(arg)
	if errors.Is(err, runstore.ErrNotConcrete) {
		return "", sf, fmt.Errorf("%s is not a concrete scenario (a run's scenario.json or a corpus entry)", arg)
	}
	if err != nil {
		return "", sf, err
	}
	if parent := filepath.Dir(arg); filepath.Base(arg) == runstore.ScenarioFile {
		if _, err := os.Stat(filepath.Join(parent, runstore.HistoryFile)); err == nil {
			dir = parent
		}
	}
	if sf.Target == "" {
		sf.Target = "reference"
	}
	return dir, sf, nil
}

// reorderArgs lets flags follow the positional argument (repro DIR
// --until 5), as they may precede it.
func reorderArgs(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func shrinkCase(ctx context.Context, sc scenarios.Scenario, want []string, so shrink.Options, stdout, stderr io.Writer) {
	fmt.Fprintf(stdout, "shrinking %s seed %d: %d sagas, %d faults (delta debugging, then a value pass; each candidate a real run that fails if 1 of %d runs shows %s; at most %d candidates, %v) …\n",
		sc.Name, sc.Seed, len(sc.Workload.Sagas), len(sc.Faults), max(1, so.Tries), strings.Join(want, " or "), so.MaxCandidates, so.Budget)
	so.Scenario, so.Want = sc, want
	so.Progress = func(s string) { fmt.Fprintln(stderr, "shrink:", s) }
	res, err := shrink.Run(ctx, so)
	if err != nil {
		fmt.Fprintln(stderr, "sagachaos:", err)
		return
	}
	fmt.Fprintf(stdout, "minimal case: %d sagas, %d faults, after %d candidates (%d accepted, %d runs, stopped: %s); it failed %d of %d confirmation runs\n",
		len(res.Minimal.Workload.Sagas), len(res.Minimal.Faults), res.Candidates, res.Accepted, res.RunsMade, res.Stopped, res.Failures, res.Runs)
	if res.RunDir == "" {
		fmt.Fprintln(stdout, "the minimal case did not fail again: it is timing-sensitive; rerun with more --shrink-tries")
		return
	}
	fmt.Fprintf(stdout, "replay it: %s\n", runstore.Replay{RunDir: res.RunDir}.Line())
}
