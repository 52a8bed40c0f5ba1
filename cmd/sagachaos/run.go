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
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/env"
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
		scenario   = fs.String("scenario", "everything", "named scenario (sagachaos list scenarios) or a scenario .json file")
		seed       = fs.Uint64("seed", 1, "seed of the run")
		seeds      = fs.String("seeds", "", "many seeds: 1-50, 1,4,9-12 (overrides --seed)")
		shard      = fs.String("shard", "", "run only shard i/n of the seeds")
		out        = fs.String("out", "runs", "directory for run directories")
		timeLimit  = fs.Duration("time-limit", 0, "bound the workload phase (default: the scenario's)")
		shrink     = fs.Bool("shrink", false, "on a violation, minimise the failing case with rapid")
		shrinkTry  = fs.Int("shrink-tries", 2, "with --shrink: a smaller case counts as failing if one of this many runs fails")
		shrinkTime = fs.Duration("shrink-budget", 10*time.Minute, "with --shrink: bound the minimisation")
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
	spec, err := scenarios.Load(*scenario)
	if err != nil {
		return fail(2, "%v", err)
	}
	if *scale <= 0 {
		return fail(2, "--scale %v: want a positive factor", *scale)
	}
	spec = spec.Scaled(*scale)
	flags := ef.args()
	if *scale != 1 {
		flags = append(flags, "--scale", strconv.FormatFloat(*scale, 'g', -1, 64))
	}
	if err := target.ValidateMutant(m, *mutant); err != nil {
		return fail(2, "%v", err)
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
		sc, err := scenarios.Generate(spec, s, cat)
		if err != nil {
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
		repro := runstore.Replay{Target: *targetName, Mutant: *mutant, Scenario: *scenario, Seed: s, TimeLimit: *timeLimit, Flags: flags}.Line()
		o := harness.Options{Manifest: m, Mutant: *mutant, Scenario: sc, OutDir: *out, Env: ef.config(), Repro: repro, Logger: log, Bin: bin, HealthTimeout: *health}
		var code int
		if sw != nil {
			code = sweepOne(ctx, sw, s, o)
		} else {
			code = runOne(ctx, o, stdout, stderr)
		}
		worst = worse(worst, code)
		if code == 1 && *shrink {
			shrinkCase(ctx, spec, cat, s, *shrinkTry, *shrinkTime, harness.Options{Manifest: m, Mutant: *mutant, OutDir: filepath.Join(*out, "shrink"), Env: ef.config(), Logger: log, Bin: bin}, stdout, stderr)
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
func sweepOne(ctx context.Context, sw *sweep, seed uint64, o harness.Options) int {
	sw.begin(seed)
	if sw.tty {
		o.Status = sw.status(seed)
	}
	t0 := time.Now()
	res, err := harness.Run(ctx, o)
	return sw.record(seed, res, err, time.Since(t0))
}

// runOne runs one case and prints its summary; it returns the exit code.
func runOne(ctx context.Context, o harness.Options, stdout, stderr io.Writer) int {
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
		return 2
	}
	_ = reports.WriteTerminal(stdout, res.Verdict, filepath.Join(res.RunDir, "report.html"), tty && isTerminal(stdout))
	code := res.Verdict.Status.ExitCode()
	if code != 0 {
		fmt.Fprintf(stdout, "replay the exact scenario.json: %s\n", runstore.Replay{RunDir: res.RunDir}.Line())
	}
	return code
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
	out := fs.String("out", "", "directory for the replay's run directory (default: next to the original)")
	verbose := fs.Bool("v", false, "log the harness's phases to stderr")
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if fs.NArg() != 1 {
		return fail(2, "repro: want one RUN_DIR")
	}
	dir := fs.Arg(0)
	sf, err := runstore.ReadScenario(dir)
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
		*out = filepath.Dir(filepath.Clean(dir))
	}
	o := harness.Options{Manifest: m, Mutant: sf.Mutant, Scenario: sf.Scenario, OutDir: *out, Env: ef.config(),
		Repro: runstore.Replay{RunDir: dir}.Line(), Logger: newLogger(stderr, *verbose), Bin: bin}
	o.RunDir = filepath.Join(*out, runstore.DirName(sf.Scenario, time.Now())+"-repro")
	code := runOne(ctx, o, stdout, stderr)
	if orig, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl")); err == nil {
		if again, err := models.ReadHistoryFile(filepath.Join(o.RunDir, "history.jsonl")); err == nil {
			f := nemesis.Compare(nemesis.FaultJournal(orig), nemesis.FaultJournal(again))
			fmt.Fprintln(stdout, f.Line())
			for _, d := range f.Differ {
				fmt.Fprintf(stdout, "  differs: %s\n", d)
			}
			for _, n := range f.NeverFired {
				fmt.Fprintf(stdout, "  %s\n", n)
			}
		}
	}
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

func shrinkCase(ctx context.Context, spec *scenarios.Spec, cat scenarios.Catalog, seed uint64, tries int, budget time.Duration, base harness.Options, stdout, stderr io.Writer) {
	fmt.Fprintf(stdout, "shrinking seed %d (each candidate is a real run; a candidate fails if 1 of %d runs is invalid) …\n", seed, tries)
	res, err := shrink.Run(ctx, shrink.Options{Spec: spec, Catalog: cat, Seed: seed, Tries: tries, Budget: budget, Base: base,
		Progress: func(s string) { fmt.Fprintln(stderr, "shrink:", s) }})
	if err != nil {
		fmt.Fprintln(stderr, "sagachaos:", err)
		return
	}
	fmt.Fprintf(stdout, "minimal case: %d sagas, %d faults, after %d candidates; it failed %d of %d confirmation runs\n",
		len(res.Minimal.Workload.Sagas), len(res.Minimal.Faults), res.Candidates, res.Failures, res.Runs)
	fmt.Fprintf(stdout, "replay it: %s\n", runstore.Replay{RunDir: res.RunDir}.Line())
}
