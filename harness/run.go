package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/observe"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/supervisor"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
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
	// and written into the verdict); build it with runstore.Replay.
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

// Run executes the loop of DESIGN §1 once: each stage is one call below,
// and what a stage hands the next is in plain sight. A returned error means
// no verdict (exit code 2, or interrupted); a verdict of any status comes
// with a nil error. Whatever happens, no process, port or cluster survives
// Run, and an interrupted or failed run leaves a run directory that says so.
func Run(ctx context.Context, o Options) (res Result, err error) {
	o = o.withDefaults(time.Now())
	sc := o.Scenario
	dir, err := runstore.Create(o.RunDir, runstore.Scenario{Target: o.Manifest.Name, TargetPath: target.ManifestPath(o.Manifest), Mutant: o.Mutant, Scenario: sc})
	if err != nil {
		return res, err
	}
	defer dir.Close()
	res.RunDir = dir.Path
	l, err := begin(o, dir)
	if err != nil {
		return res, err
	}
	defer func() { res.Verdict, err = l.end(ctx, res.Verdict, err) }()

	l.phase("build")
	bin, err := target.Build(ctx, o.Manifest, o.Bin)
	if err != nil {
		return res, err
	}
	if err := target.ValidateMutant(o.Manifest, o.Mutant); err != nil {
		return res, &InputError{Err: err}
	}

	l.phase("env-up")
	e, err := env.Up(ctx, envConfig(o, dir.Path))
	if err != nil {
		return res, err
	}
	l.cleanup(supervisor.OnAbort(func() { _ = e.Close() }))
	l.cleanup(func() { _ = e.Close() })
	ctx, stopWatch := watchRefusals(ctx, e, o.Manifest)
	defer stopWatch()
	w, err := world.Start(ctx, l.rec, o.Manifest.World, world.WithLogger(l.log))
	if err != nil {
		return res, fmt.Errorf("start the world: %w", err)
	}
	l.cleanup(func() { _ = w.Close() })
	recordResources(l, o.Manifest, sc)
	// The aimed faults' triggers count events from here on: world effects
	// and failpoint lines as they are recorded, records as the tail reads
	// them.
	events := triggerEvents(o.Manifest, e, sc)
	l.cleanup(l.rec.Subscribe(events.Observe))

	l.phase("target-up")
	tg, err := target.Start(ctx, target.Config{Manifest: o.Manifest, Env: e, World: w, Rec: l.rec, Log: l.log, Bin: bin, RunDir: dir.Path,
		Mutant: o.Mutant, FailpointLog: dir.File(runstore.FailpointLog), HealthTimeout: o.HealthTimeout}, sc)
	if err != nil {
		return res, refused(e, o.Manifest, err)
	}
	l.cleanup(tg.Close)
	client, err := e.NewLink(scenarios.LinkName("client", o.Manifest.API.Process), tg.APIAddr())
	if err != nil {
		return res, err
	}
	drv := workload.New(l.rec, "http://"+client.Listen(), workload.WithSpec(*o.Manifest.Workload),
		workload.WithTimeout(sc.Limits.ClientTimeout.D()), workload.WithLogger(l.log))
	nem := &nemesis.Nemesis{Rec: l.rec, Env: e, Target: tg, World: w, Events: events, Log: l.log}
	if e.KafkaCluster() != nil || len(e.DirectBrokers()) > 0 {
		nem.Rewinder = &nemesis.GroupRewinder{Brokers: e.DirectBrokers()}
	}
	slotsObserved := watchSlots(l, o.Manifest, sc, e, nem)

	l.phase("workload")
	var topics []string
	for _, tp := range o.Manifest.Topics {
		topics = append(topics, e.TopicName(tp.Name))
	}
	tail, err := nemesis.StartTail(e.DirectBrokers(), topics, events, l.log)
	if err != nil {
		return res, fmt.Errorf("tail the topics for the fault triggers: %w", err)
	}
	l.cleanup(tail.Stop)
	err = chaos(ctx, l, sc, drv, nem, tg)
	tail.Stop()
	if err != nil {
		return res, err
	}

	l.phase("heal")
	heal(ctx, l, o.Manifest, e, tg)

	obs := observeTarget(o.Manifest, drv)
	obs.APIURL, obs.DSN, obs.Brokers = "http://"+tg.APIAddr(), e.DirectDSN, e.DirectBrokers()
	obs.Settle, obs.StuckTimeouts = sc.Limits.Settle.D(), sc.Limits.StuckTimeouts
	for _, tp := range o.Manifest.Topics {
		obs.Topics = append(obs.Topics, e.TopicName(tp.Name))
	}
	l.phase("quiesce")
	if err := quiesce(ctx, l, obs, sc.Limits.Quiesce.D()); err != nil {
		return res, err
	}
	l.phase("observe")
	if err := observeState(ctx, l, obs); err != nil {
		return res, err
	}
	slotsObserved(ctx)

	l.phase("check")
	tg.Close()
	res.Verdict, err = check(l)
	if err != nil {
		return res, err
	}
	return res, runstore.WriteArtifacts(dir.Path, l.history, res.Verdict)
}

func (o Options) withDefaults(now time.Time) Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.RunDir == "" {
		out := o.OutDir
		if out == "" {
			out = "runs"
		}
		o.RunDir = filepath.Join(out, runstore.DirName(o.Scenario, now))
	}
	return o
}

func envConfig(o Options, runDir string) env.Config {
	c := o.Env
	c.Dir = runDir
	c.Databases = o.Manifest.Databases
	c.PostgresSettings = o.Manifest.PostgresSettings()
	c.Logger = o.Logger
	for _, tp := range o.Manifest.Topics {
		c.Topics = append(c.Topics, env.Topic{Name: tp.Name, Partitions: tp.Partitions})
	}
	return c
}

// quiesce is the quiesce stage: wait until no saga is in flight, at most d.
// Only an interrupt is an error; a deadline is journaled and judged.
func quiesce(ctx context.Context, l *loop, obs observe.Target, d time.Duration) error {
	if _, err := observe.Quiesce(ctx, l.rec, obs, d, 200*time.Millisecond); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn("quiesce", "err", err)
	}
	return nil
}

// observeState is the observe stage: the final snapshot, bounded.
func observeState(ctx context.Context, l *loop, obs observe.Target) error {
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := observe.Observe(octx, l.rec, obs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn("observe", "err", err)
	}
	return nil
}

// recordResources journals the initial amounts of every counted resource
// the scenario drew (or the manifest declared), before the target starts.
func recordResources(l *loop, m *targets.Manifest, sc scenarios.Scenario) {
	for _, r := range m.Resources {
		if amounts, ok := sc.Workload.Resources[r.Name]; ok && r.Kind == "" {
			l.rec.Record(models.ProcHarness, models.Info, models.FResourceInit, "", models.ResourceInit{Resource: r.Name, Amounts: amounts})
		}
	}
}

// observeTarget is what the quiesce and observe stages read of the
// manifest: the workload's list or read, the saga (nil: outbox-only; its
// statuses end the quiesce wait and its step timeout lets the wait prove a
// saga stuck), the counted resources' SQL and the observer SQL.
func observeTarget(m *targets.Manifest, drv *workload.Driver) observe.Target {
	t := observe.Target{Observe: m.Observe, Workload: m.Workload, Saga: m.Saga, IDs: drv.IDs, SeqFromOutbox: m.SeqFromOutbox()}
	for _, r := range m.Resources {
		if q, ok := m.ResourceQuery(r.Name); ok && r.Kind == "" {
			t.Resources = append(t.Resources, observe.ResourceQuery{Name: r.Name, Query: q})
		}
	}
	return t
}

// triggerEvents is the event counter of the run's fault triggers: what
// each process consumes (topics as the broker names them) and which
// process each instance belongs to.
func triggerEvents(m *targets.Manifest, e *env.Env, sc scenarios.Scenario) *nemesis.Events {
	var consumers []models.ConsumerDecl
	procOf := map[string]string{}
	for _, p := range m.Processes {
		n := p.Replicas
		if r, ok := sc.Replicas[p.Name]; ok {
			n = r
		}
		for _, in := range scenarios.Instances(p.Name, n) {
			procOf[in] = p.Name
		}
		for _, c := range p.Consumes {
			cd := models.ConsumerDecl{Process: p.Name, Consumer: c.Consumer, Group: c.Group, Types: c.Types}
			for _, tp := range c.Topics {
				cd.Topics = append(cd.Topics, e.TopicName(tp))
			}
			consumers = append(consumers, cd)
		}
	}
	return nemesis.NewEvents(consumers, procOf)
}
