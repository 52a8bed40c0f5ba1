package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/observe"
	"github.com/sagachaos/sagachaos/harness/supervisor"
	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// Options configure one run.
type Options struct {
	Manifest *targets.Manifest
	Mutant   string
	Scenario scenarios.Scenario
	// RunDir is the run directory to create; empty: OutDir/<time>-<scenario>-<seed>.
	RunDir string
	OutDir string
	Env    env.Config
	// Repro is the command line that replays this run (printed on failure
	// and written into the verdict).
	Repro  string
	Logger *slog.Logger
	// Status, when set, receives a live one-line status every second.
	Status func(Status)
	// Bin is where target binaries are built; empty: a per-user cache dir.
	Bin string
	// HealthTimeout bounds how long each component may take to become
	// healthy (default 30s).
	HealthTimeout time.Duration
}

// Status is the live state of a run, for the terminal status line.
type Status struct {
	Phase   string
	Invoked int64
	Planned int
	Ops     int
	Faults  []string
	Elapsed time.Duration
	Crashes int
}

// Result is what a run produced.
type Result struct {
	RunDir  string
	Verdict models.Verdict
}

// InputError is bad input (a scenario, a manifest, a flag): exit code 2.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ErrInterrupted is returned when the run was stopped (Ctrl-C) before a
// verdict; the run directory says so.
var ErrInterrupted = errors.New("run interrupted")

// RunDirName is the default run directory name.
func RunDirName(sc scenarios.Scenario, now time.Time) string {
	return fmt.Sprintf("%s-%s-%d", now.UTC().Format("20060102T150405"), sc.Name, sc.Seed)
}

// Run executes the loop of DESIGN §1 once. A returned error means no
// verdict (exit code 2, or interrupted); a verdict of any status comes with
// a nil error.
func Run(ctx context.Context, o Options) (res Result, err error) {
	start := time.Now()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sc := o.Scenario
	if o.RunDir == "" {
		out := o.OutDir
		if out == "" {
			out = "runs"
		}
		o.RunDir = filepath.Join(out, RunDirName(sc, start))
	}
	// Components run with the run directory as their working directory and
	// get paths into it through env: only an absolute path means the same
	// thing to both.
	if abs, err := filepath.Abs(o.RunDir); err == nil {
		o.RunDir = abs
	}
	res.RunDir = o.RunDir
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return res, fmt.Errorf("create run dir: %w", err)
	}
	if err := writeJSON(filepath.Join(o.RunDir, "scenario.json"), ScenarioFile{Target: o.Manifest.Name, TargetPath: manifestPath(o.Manifest), Mutant: o.Mutant, Scenario: sc}); err != nil {
		return res, err
	}
	hf, err := os.OpenFile(filepath.Join(o.RunDir, "history.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return res, fmt.Errorf("create history: %w", err)
	}
	defer hf.Close()
	info := models.RunInfo{ID: filepath.Base(o.RunDir), Target: o.Manifest.Name, Mutant: o.Mutant, Scenario: sc.Name, Seed: sc.Seed, Repro: o.Repro}
	rec, err := models.NewRecorder(hf, models.Header{Run: info.ID})
	if err != nil {
		return res, err
	}
	rec.Record(models.ProcHarness, models.Info, models.FRunStart, "", info)
	phase := func(name string) {
		rec.Record(models.ProcHarness, models.Info, models.FPhase, "", models.Phase{Name: name})
		log.Info("phase", "name", name)
	}
	var (
		statusMu sync.Mutex
		status   = Status{Planned: len(sc.Workload.Orders)}
	)
	setPhase := func(p string) {
		statusMu.Lock()
		status.Phase = p
		statusMu.Unlock()
		phase(p)
	}

	// Whatever happens below, no process, port or cluster survives Run; an
	// interrupted or failed run leaves a run directory that says so.
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if err != nil {
			reason := err.Error()
			interrupted := ctx.Err() != nil
			if interrupted {
				rec.Record(models.ProcHarness, models.Info, models.FInterrupted, "", map[string]string{"reason": reason})
				err = fmt.Errorf("%w: %v", ErrInterrupted, err)
			}
			v := models.Verdict{Version: models.VerdictVersion, Status: models.Unknown, Run: info, Ops: rec.Len(), Error: reason, Interrupted: interrupted}
			res.Verdict = v
			_ = writeJSON(filepath.Join(o.RunDir, "verdict.json"), v)
		}
	}()
	if p := recover(); p != nil {
		panic(p)
	}

	bin := o.Bin
	if bin == "" {
		bin = defaultBin(o.Manifest)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return res, fmt.Errorf("bin dir: %w", err)
	}
	setPhase("build")
	if err := buildTarget(ctx, o.Manifest, bin); err != nil {
		return res, err
	}
	if err := ValidateMutant(o.Manifest, o.Mutant); err != nil {
		return res, &InputError{Err: err}
	}

	setPhase("env-up")
	ecfg := o.Env
	ecfg.Dir = o.RunDir
	ecfg.Databases = o.Manifest.Databases
	ecfg.Logger = log
	for _, tp := range o.Manifest.Topics {
		ecfg.Topics = append(ecfg.Topics, env.Topic{Name: tp.Name, Partitions: tp.Partitions})
	}
	e, err := env.Up(ctx, ecfg)
	if err != nil {
		return res, err
	}
	cleanups = append(cleanups, func() { _ = e.Close() })

	w, err := world.Start(ctx, rec)
	if err != nil {
		return res, fmt.Errorf("start the world: %w", err)
	}
	cleanups = append(cleanups, func() { _ = w.Close() })

	rec.Record(models.ProcHarness, models.Info, models.FInitStock, "", models.InitialStock{Stock: sc.Workload.InitialStock})
	setPhase("target-up")
	sup := supervisor.New(log)
	t := &target{m: o.Manifest, sup: sup, env: e, world: w, rec: rec, log: log, bin: bin, runDir: o.RunDir,
		mutant: o.Mutant, stock: sc.Workload.InitialStock, fpLog: filepath.Join(o.RunDir, "failpoints.jsonl"), healthTimeout: o.HealthTimeout}
	if t.healthTimeout <= 0 {
		t.healthTimeout = defaultHealthTimeout
	}
	cleanups = append(cleanups, t.stop)
	if err := t.start(ctx, sc); err != nil {
		return res, err
	}
	clientLink, err := e.NewLink(scenarios.LinkName("client", o.Manifest.API.Process), t.apiAddr())
	if err != nil {
		return res, err
	}

	// Workload and nemesis run concurrently, both appending to the history.
	setPhase("workload")
	wctx, wcancel := context.WithTimeout(ctx, sc.Limits.TimeLimit.D())
	defer wcancel()
	drv := workload.New(rec, "http://"+clientLink.Listen(), workload.WithTimeout(sc.Limits.ClientTimeout.D()), workload.WithLogger(log))
	nem := &nemesis.Nemesis{Rec: rec, Env: e, Components: t, Gateway: w.Gateway, Log: log}
	if e.KafkaCluster() != nil || len(e.DirectBrokers()) > 0 {
		nem.Rewinder = &groupRewinder{brokers: e.DirectBrokers()}
	}
	workloadDone := make(chan struct{})
	heal := make(chan struct{})
	var nemWG sync.WaitGroup
	nemWG.Add(1)
	go func() {
		defer nemWG.Done()
		nem.Run(wctx, sc.Faults, drv.Subscribe, workloadDone, heal)
	}()
	stopStatus := make(chan struct{})
	if o.Status != nil {
		go func() {
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				select {
				case <-stopStatus:
					return
				case <-tk.C:
					statusMu.Lock()
					s := status
					statusMu.Unlock()
					s.Invoked = drv.Invoked()
					s.Ops = rec.Len()
					s.Faults = nem.Active()
					s.Elapsed = time.Since(start)
					t.mu.Lock()
					s.Crashes = t.crashes
					t.mu.Unlock()
					o.Status(s)
				}
			}
		}()
	}
	defer close(stopStatus)
	werr := drv.Run(wctx, sc.Workload)
	close(workloadDone)
	// Let fault windows that opened near the end run their course: the
	// heal step must not erase the fault the seed asked for.
	waitOrHeal(wctx, &nemWG, 5*time.Second)
	close(heal)
	nemWG.Wait()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return res, fmt.Errorf("workload: %w", werr)
	}
	if wctx.Err() != nil {
		rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "time-limit", "note": "workload stopped at the time limit"})
	}

	setPhase("heal")
	hctx, hcancel := context.WithTimeout(ctx, 90*time.Second)
	defer hcancel()
	if err := e.HealAll(); err != nil {
		log.Warn("heal links", "err", err)
	}
	// Restart PostgreSQL only if it is down (a db-crash whose window was cut
	// short): restarting a live server would be a fault nobody planned.
	if len(o.Manifest.Databases) > 0 && !postgresUp(hctx, e.DirectDSN(o.Manifest.Databases[0])) {
		err := e.RestartPostgres(hctx)
		rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "heal", "action": "restart postgres", "error": errString(err)})
		if err != nil && !errors.Is(err, env.ErrUnsupported) {
			log.Warn("postgres restart during heal", "err", err)
		}
	}
	if err := t.heal(hctx); err != nil {
		log.Warn("heal target", "err", err)
		rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "heal", "error": err.Error()})
	}

	obsTarget := observe.Target{APIURL: "http://" + t.apiAddr(), DSN: e.DirectDSN, Brokers: e.DirectBrokers(), Observe: o.Manifest.Observe}
	for _, tp := range o.Manifest.Topics {
		obsTarget.Topics = append(obsTarget.Topics, e.TopicName(tp.Name))
	}
	setPhase("quiesce")
	if _, err := observe.Quiesce(ctx, rec, obsTarget, sc.Limits.Quiesce.D(), 200*time.Millisecond); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		log.Warn("quiesce", "err", err)
	}
	setPhase("observe")
	octx, ocancel := context.WithTimeout(ctx, 60*time.Second)
	defer ocancel()
	if err := observe.Observe(octx, rec, obsTarget); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		log.Warn("observe", "err", err)
	}
	setPhase("check")
	t.stop()
	rec.Record(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int64{"elapsed_ms": time.Since(start).Milliseconds()})
	if err := rec.Err(); err != nil {
		return res, err
	}
	h := rec.History()
	v := checkers.CheckAll(h, models.OrderSaga)
	v.Run = info
	res.Verdict = v
	if err := WriteArtifacts(o.RunDir, h, v); err != nil {
		return res, err
	}
	return res, nil
}

// waitOrHeal waits for the nemesis to finish on its own, at most d.
func waitOrHeal(ctx context.Context, wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// WriteArtifacts writes verdict.json, junit.xml and report.html into a run
// directory.
func WriteArtifacts(dir string, h *models.History, v models.Verdict) error {
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		return f.Close()
	}
	if err := write("verdict.json", func(w io.Writer) error { return reports.WriteJSON(w, v) }); err != nil {
		return err
	}
	if err := write("junit.xml", func(w io.Writer) error { return reports.WriteJUnit(w, v) }); err != nil {
		return err
	}
	return write("report.html", func(w io.Writer) error {
		return reports.WriteHTML(w, h, v, reports.HTMLOptions{RunDir: dir})
	})
}

// ScenarioFile is scenario.json: everything needed to re-run a run.
type ScenarioFile struct {
	Target     string             `json:"target"`
	TargetPath string             `json:"target_path,omitempty"`
	Mutant     string             `json:"mutant,omitempty"`
	Scenario   scenarios.Scenario `json:"scenario"`
}

// ReadScenarioFile reads a run directory's scenario.json.
func ReadScenarioFile(runDir string) (ScenarioFile, error) {
	var sf ScenarioFile
	b, err := os.ReadFile(filepath.Join(runDir, "scenario.json"))
	if err != nil {
		return sf, &InputError{Err: fmt.Errorf("read run dir: %w", err)}
	}
	if err := json.Unmarshal(b, &sf); err != nil {
		return sf, &InputError{Err: fmt.Errorf("%s/scenario.json: %w", runDir, err)}
	}
	return sf, nil
}

func manifestPath(m *targets.Manifest) string {
	if m.Dir == "" {
		return ""
	}
	p, err := filepath.Abs(filepath.Join(m.Dir, "manifest.json"))
	if err != nil {
		return ""
	}
	return p
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// ValidateMutant checks a mutant name against the manifest's catalogue.
func ValidateMutant(m *targets.Manifest, name string) error {
	if name == "" {
		return nil
	}
	var known []string
	for _, mu := range m.Mutants {
		if mu.Name == name {
			return nil
		}
		known = append(known, mu.Name)
	}
	return fmt.Errorf("unknown mutant %q for target %s (known: %s)", name, m.Name, strings.Join(known, ", "))
}

// FindTarget resolves --target: a path to a manifest file, or the name of a
// directory under targets/ (searched from the working directory upwards).
func FindTarget(nameOrPath string) (*targets.Manifest, error) {
	if strings.HasSuffix(nameOrPath, ".json") {
		m, err := targets.LoadManifest(nameOrPath)
		if err != nil {
			return nil, &InputError{Err: err}
		}
		return m, nil
	}
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "targets", nameOrPath, "manifest.json")
		if _, err := os.Stat(p); err == nil {
			m, err := targets.LoadManifest(p)
			if err != nil {
				return nil, &InputError{Err: err}
			}
			return m, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, &InputError{Err: fmt.Errorf("unknown target %q: no targets/%s/manifest.json above the working directory (pass a manifest path)", nameOrPath, nameOrPath)}
		}
		dir = parent
	}
}

// Catalog builds the generator's view of a target.
func Catalog(m *targets.Manifest, fps []targets.Failpoint) scenarios.Catalog {
	c := scenarios.Catalog{APIProcess: m.API.Process}
	for _, p := range m.Processes {
		c.Processes = append(c.Processes, scenarios.Process{Name: p.Name, Role: p.Role, Depends: p.Depends, Replicas: p.Replicas})
	}
	for _, f := range fps {
		c.Failpoints = append(c.Failpoints, scenarios.FailpointRef{Name: f.Name, Component: f.Component})
	}
	return c
}

// Prepare builds the target and lists its failpoints: what a caller needs
// before generating a scenario.
func Prepare(ctx context.Context, m *targets.Manifest, bin string) (string, []targets.Failpoint, error) {
	if bin == "" {
		bin = defaultBin(m)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return bin, nil, err
	}
	if err := buildTarget(ctx, m, bin); err != nil {
		return bin, nil, err
	}
	fps, err := failpointCatalog(ctx, m, bin)
	return bin, fps, err
}

// defaultBin is where a target's binaries are built: a per-user cache dir
// keyed by the target and by the checkout it is built from, so two
// checkouts (a CI clone beside a working tree) never run each other's build.
func defaultBin(m *targets.Manifest) string {
	root, err := moduleRoot(m.Dir)
	if err != nil {
		root = m.Dir
	}
	sum := sha256.Sum256([]byte(root))
	name := fmt.Sprintf("%s-%x", m.Name, sum[:6])
	if c, err := os.UserCacheDir(); err == nil {
		return filepath.Join(c, "sagachaos", "bin", name)
	}
	return filepath.Join(os.TempDir(), "sagachaos-bin", name)
}

// postgresUp reports whether the server answers a query within a second.
func postgresUp(ctx context.Context, dsn string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx) == nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
