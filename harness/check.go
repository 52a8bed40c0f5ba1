package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// Check is the go-test entry point (DESIGN §10): the property "every run of
// the target m under a scenario drawn from spec is valid", driven by rapid.
// rapid draws a workload and a fault plan from spec's ranges, each drawn
// case is a real run (PostgreSQL, Kafka, the target's processes, faults),
// and a run whose verdict is not valid fails the property, so rapid shrinks
// it to a smaller failing case and saves a fail file that replays it first
// on every later run.
//
// Nothing lies to rapid: the number of real runs is bounded by telling rapid
// its own budget — Runs sets how many cases it draws, ShrinkTime how long it
// minimises — and the property is the same function of the drawn case every
// time rapid calls it (with Tries > 1, "one of Tries runs is invalid"). A
// run that cannot produce a verdict (the environment or the target would not
// start) stops the search and fails the test with that error; it is not a
// property failure for rapid to shrink.
//
// Fail files go under FailFiles' directory, not the package's testdata/
// (rapid's default, which would land in the repository and be replayed by
// everyone's `go test`). Check changes the working directory for the
// duration of the call to put them there, so it cannot run in a parallel
// test (t.Chdir panics there).
func Check(t testing.TB, m *targets.Manifest, spec *scenarios.Spec, opts ...CheckOption) {
	t.Helper()
	c := checkConfig{runs: 3, shrinkTime: 3 * time.Minute, tries: 1}
	if testing.Short() {
		c.runs = 1
	}
	for _, o := range opts {
		o(&c)
	}
	if c.runs < 1 || c.tries < 1 {
		t.Fatalf("sagachaos: Check: Runs and Tries must be at least 1 (got %d, %d)", c.runs, c.tries)
	}
	ctx := t.Context()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("sagachaos: Check: %v", err)
	}
	// Every path the runs use is made absolute: the working directory
	// changes below.
	mc := *m
	if mc.Dir != "" && !filepath.IsAbs(mc.Dir) {
		mc.Dir = filepath.Join(wd, mc.Dir)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	c.out, c.bin, c.failRoot = abs(c.out), abs(c.bin), abs(c.failRoot)
	if c.failRoot == "" {
		c.failRoot = defaultFailRoot(wd)
	}
	if c.out == "" {
		c.out = filepath.Join(os.TempDir(), "sagachaos-check", safeName(t.Name())+"-"+strconv.Itoa(os.Getpid()))
		// Passing runs are of no interest; a failing test keeps them.
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(c.out)
			}
		})
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		t.Fatalf("sagachaos: Check: %v", err)
	}
	if err := os.MkdirAll(c.failRoot, 0o755); err != nil {
		t.Fatalf("sagachaos: Check: fail file directory: %v", err)
	}
	bin, fps, err := target.Prepare(ctx, &mc, c.bin)
	if err != nil {
		t.Fatalf("sagachaos: Check: prepare target %s: %v", mc.Name, err)
	}
	if err := target.ValidateMutant(&mc, c.mutant); err != nil {
		t.Fatalf("sagachaos: Check: %v", err)
	}
	cat := target.Catalog(&mc, fps)
	if err := spec.CheckAgainst(spec.Name, cat); err != nil {
		t.Fatalf("sagachaos: Check: %v", err)
	}
	gen := scenarios.ScenarioGen(spec, cat)
	log := c.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	restore, err := setRapidFlags(c, testing.Short(), wd)
	if err != nil {
		t.Fatalf("sagachaos: Check: %v", err)
	}
	defer restore()
	failDir := filepath.Join(c.failRoot, "testdata", "rapid", safeName(t.Name()))
	before := failFiles(failDir)
	t.Chdir(c.failRoot)
	defer func() {
		// Back at once (t.Chdir only restores when the test ends).
		_ = os.Chdir(wd)
		_ = os.Setenv("PWD", wd)
	}()

	var (
		mu               sync.Mutex
		runs, cases      int
		firstFail, least *scenarios.Scenario
		leastDir         string
		aborted          error
	)
	prop := func(rt *rapid.T) {
		sc := gen.Draw(rt, "scenario")
		mu.Lock()
		if aborted != nil {
			mu.Unlock()
			return // the search is over; the test fails below with why
		}
		cases++
		n := cases
		mu.Unlock()
		rt.Logf("sagachaos: case %d: %s", n, describeCase(sc))
		for try := 0; try < c.tries; try++ {
			mu.Lock()
			runs++
			dir := filepath.Join(c.out, fmt.Sprintf("case-%03d-%d", n, try))
			mu.Unlock()
			res, err := Run(ctx, Options{Manifest: &mc, Mutant: c.mutant, Scenario: sc, RunDir: dir, Env: c.env,
				Repro: "sagachaos repro " + dir, Logger: log, Bin: bin, HealthTimeout: c.healthTimeout})
			if err != nil {
				mu.Lock()
				if aborted == nil {
					aborted = fmt.Errorf("case %d: %w", n, err)
				}
				mu.Unlock()
				return
			}
			if res.Verdict.Status == models.Valid {
				continue
			}
			for _, r := range res.Verdict.Results {
				for _, v := range r.Violations {
					rt.Logf("sagachaos: %s/%s: order %s: %s (ops %v)", v.Checker, v.Kind, v.Order, v.Message, v.Ops)
				}
				if r.Status == models.Unknown {
					rt.Logf("sagachaos: %s unknown: %s", r.Checker, r.Unknown)
				}
			}
			rt.Logf("sagachaos: report %s", filepath.Join(res.RunDir, "report.html"))
			mu.Lock()
			failed := sc
			if firstFail == nil {
				firstFail = &failed
			}
			if least == nil || size(failed) <= size(*least) {
				least, leastDir = &failed, res.RunDir
			}
			mu.Unlock()
			// One message per status, from one place: rapid accepts a
			// smaller case only if it fails the same way.
			rt.Fatalf("sagachaos: verdict %s", res.Verdict.Status)
		}
	}
	start := time.Now()
	func() {
		t.Helper()
		defer func() {
			// rapid ends a failed check with t.FailNow; say what was run
			// on the way out.
			mu.Lock()
			defer mu.Unlock()
			t.Logf("sagachaos: %d cases (search, shrink and replays), %d real runs in %v (run directories under %s)", cases, runs, time.Since(start).Truncate(time.Second), c.out)
			if firstFail != nil {
				t.Logf("sagachaos: first failing case: %s; smallest failing case: %s; its report: %s",
					describeCase(*firstFail), describeCase(*least), filepath.Join(leastDir, "report.html"))
			}
			if after := failFiles(failDir); len(after) > 0 {
				t.Logf("sagachaos: fail files (replayed first on every later run; delete one once its bug is fixed): %s", strings.Join(after, " "))
			} else if len(before) > 0 {
				t.Logf("sagachaos: fail files under %s no longer fail", failDir)
			}
			if aborted != nil {
				t.Errorf("sagachaos: the harness could not run a case, so the search stopped: %v", aborted)
			}
		}()
		rapid.Check(t, prop)
	}()
}

// CheckOption configures Check.
type CheckOption func(*checkConfig)

type checkConfig struct {
	runs          int
	shrinkTime    time.Duration
	tries         int
	mutant        string
	env           env.Config
	out, bin      string
	failRoot      string
	logger        *slog.Logger
	healthTimeout time.Duration
}

// Runs sets how many cases rapid draws and runs, each a real run (default
// 3; 1 under -short). It sets rapid's -rapid.checks accordingly (rapid
// divides that by 5 under -short; Check compensates). An explicit
// -rapid.checks or RAPID_CHECKS wins.
func Runs(n int) CheckOption { return func(c *checkConfig) { c.runs = n } }

// ShrinkTime bounds how long rapid minimises a failing case, each candidate
// a real run (default 3m; rapid's own default of 30s fits only a few real
// runs). It sets -rapid.shrinktime; an explicit -rapid.shrinktime or
// RAPID_SHRINKTIME wins.
func ShrinkTime(d time.Duration) CheckOption { return func(c *checkConfig) { c.shrinkTime = d } }

// Tries makes a case fail if any of n runs of it is not valid (default 1):
// faults are timing-sensitive, and a shrunk candidate that passes once
// proves little. Each try is a real run.
func Tries(n int) CheckOption { return func(c *checkConfig) { c.tries = n } }

// Mutant switches on a planted bug of the target (default none): a test of
// the harness itself, or a demonstration.
func Mutant(name string) CheckOption { return func(c *checkConfig) { c.mutant = name } }

// WithEnv selects the environment's providers (default: the embedded ones,
// or what SAGACHAOS_POSTGRES_DSN / SAGACHAOS_KAFKA_BROKERS select).
func WithEnv(cfg env.Config) CheckOption { return func(c *checkConfig) { c.env = cfg } }

// OutDir is where the run directories go (default: a directory under
// os.TempDir named after the test, removed when the test passes).
func OutDir(dir string) CheckOption { return func(c *checkConfig) { c.out = dir } }

// FailFiles is the directory under which rapid keeps its fail files, as
// testdata/rapid/<Test>/ (default: a per-user cache directory keyed by the
// package directory, so the fail files replay on this machine and stay out
// of the repository). FailFiles(".") is rapid's own default, the package
// directory: commit them as regression cases.
func FailFiles(dir string) CheckOption { return func(c *checkConfig) { c.failRoot = dir } }

// BinDir is where the target is built (default: a per-user cache directory
// per target and checkout).
func BinDir(dir string) CheckOption { return func(c *checkConfig) { c.bin = dir } }

// WithLogger receives the harness's phase logs (default: discarded).
func WithLogger(l *slog.Logger) CheckOption { return func(c *checkConfig) { c.logger = l } }

// HealthTimeout bounds how long each component may take to become healthy
// (default 30s).
func HealthTimeout(d time.Duration) CheckOption { return func(c *checkConfig) { c.healthTimeout = d } }

// defaultFailRoot is a per-user cache directory for the package in dir.
func defaultFailRoot(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sagachaos", "rapid", filepath.Base(dir)+"-"+hex.EncodeToString(sum[:6]))
}

var rapidFlagMu sync.Mutex

// userSet reports whether the user chose a rapid knob: on the test binary's
// command line or in the environment variable rapid reads. (flag.Visit
// cannot tell: it also reports what other code set with flag.Set.)
func userSet(name, envName string) bool {
	if _, ok := os.LookupEnv(envName); ok {
		return true
	}
	for _, a := range os.Args[1:] {
		if a == "--" {
			break
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// setRapidFlags gives rapid Check's budget unless the user set a knob, and
// makes a relative -rapid.failfile absolute (the working directory is about
// to change). restore puts every flag back.
func setRapidFlags(c checkConfig, short bool, wd string) (restore func(), err error) {
	rapidFlagMu.Lock()
	defer rapidFlagMu.Unlock()
	checks := c.runs
	if short {
		checks *= 5 // rapid runs checks/5 under -short
	}
	want := map[string]string{"rapid.checks": strconv.Itoa(checks), "rapid.shrinktime": c.shrinkTime.String()}
	if f := flag.Lookup("rapid.failfile"); f != nil && f.Value.String() != "" && !filepath.IsAbs(f.Value.String()) {
		want["rapid.failfile"] = filepath.Join(wd, f.Value.String())
	}
	old := map[string]string{}
	for name, v := range want {
		f := flag.Lookup(name)
		if f == nil {
			return func() {}, fmt.Errorf("rapid flag -%s is not registered", name)
		}
		if name != "rapid.failfile" && userSet(name, rapidEnv[name]) {
			continue
		}
		old[name] = f.Value.String()
		if err := flag.Set(name, v); err != nil {
			return func() {}, fmt.Errorf("set -%s: %w", name, err)
		}
	}
	return func() {
		rapidFlagMu.Lock()
		defer rapidFlagMu.Unlock()
		for name, v := range old {
			_ = flag.Set(name, v)
		}
	}, nil
}

// rapidEnv names the environment variable rapid reads for a flag's default.
var rapidEnv = map[string]string{"rapid.checks": "RAPID_CHECKS", "rapid.shrinktime": "RAPID_SHRINKTIME"}

// failFiles lists the fail files rapid keeps in dir.
func failFiles(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.fail"))
	return m
}

// safeName is rapid's file name for a test name (its kindaSafeFilename).
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	return windowsReserved.ReplaceAllString(b.String(), "${0}_")
}

var windowsReserved = regexp.MustCompile(`(?i)^(CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])$`)

// size orders cases by how much they ask for (sagas, their bodies,
// faults), as the CLI's shrink does.
func size(sc scenarios.Scenario) int {
	n := len(sc.Workload.Sagas)*10 + len(sc.Faults)*100
	for _, o := range sc.Workload.Sagas {
		n += len(o.Body) / 16
	}
	return n
}

// describeCase says how big a case is, for the logs.
func describeCase(sc scenarios.Scenario) string {
	declined := 0
	for _, o := range sc.Workload.Sagas {
		if strings.Contains(string(o.Body), models.OutcomeDecline) { // an outcome token in the body
			declined++
		}
	}
	kinds := make([]string, 0, len(sc.Faults))
	for _, f := range sc.Faults {
		kinds = append(kinds, f.Kind)
	}
	return fmt.Sprintf("%d sagas (%d declined), %d faults [%s]", len(sc.Workload.Sagas), declined, len(sc.Faults), strings.Join(kinds, " "))
}
