// Package target is the target stage of the loop: it turns a manifest into
// running components — templating each instance's env and links, starting
// it as a real process, waiting until it is healthy — and keeps them
// running: a component that dies by itself is journaled and restarted, and
// the nemesis kills, pauses and restarts instances through it. It also
// builds the target, lists its failpoint catalogue and resolves --target.
package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/supervisor"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// DefaultHealthTimeout bounds how long one instance may take to become
// healthy when Config.HealthTimeout is zero.
const DefaultHealthTimeout = 30 * time.Second

// Config is what the target stage needs from the stages before it.
type Config struct {
	Manifest *targets.Manifest
	Env      *env.Env
	World    *world.World
	Rec      *models.Recorder
	Log      *slog.Logger
	// Bin is where Build wrote the target's binaries ({{bin}}).
	Bin string
	// RunDir is every component's working directory and log directory.
	RunDir string
	Mutant string
	// FailpointLog is SAGACHAOS_FAILPOINT_LOG of every component.
	FailpointLog string
	// HealthTimeout bounds how long one instance may take to become
	// healthy (default DefaultHealthTimeout).
	HealthTimeout time.Duration
}

// instance is one running component of the target.
type instance struct {
	name    string
	process targets.Process
	listen  string
	baseEnv []string          // filled templates, without failpoints
	armed   map[string]string // failpoint name → "action@hit", disarmed once it fired

	proc    *supervisor.Proc
	killing bool // the nemesis stopped it on purpose; do not treat the exit as a crash
	starts  int

	// replaceMu serialises replacing the incarnation: the crash watcher,
	// the nemesis and the heal step may all decide to restart one instance,
	// and only the first of them may.
	replaceMu sync.Mutex
}

// Target is the system under test, started from its manifest.
type Target struct {
	m      *targets.Manifest
	sup    *supervisor.Supervisor
	env    *env.Env
	world  *world.World
	rec    *models.Recorder
	log    *slog.Logger
	bin    string
	runDir string
	mutant string
	stock  map[string]int64
	fpLog  string
	// healthTimeout bounds how long one instance may take to become healthy.
	healthTimeout time.Duration

	mu        sync.Mutex
	instances map[string]*instance
	order     []string
	crashes   int
	closed    bool
	wg        sync.WaitGroup
}

// Error is a target that could not be built or started: exit code 2,
// never a verdict.
type Error struct{ Err error }

func (e *Error) Error() string { return "target: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Start brings every instance of the scenario up (replicas as the scenario
// says, failpoints armed as its plan says) and waits until each is
// healthy. On an error it stops whatever it started.
func Start(ctx context.Context, cfg Config, sc scenarios.Scenario) (*Target, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	t := &Target{m: cfg.Manifest, sup: supervisor.New(log), env: cfg.Env, world: cfg.World, rec: cfg.Rec, log: log,
		bin: cfg.Bin, runDir: cfg.RunDir, mutant: cfg.Mutant, stock: sc.Workload.InitialStock, fpLog: cfg.FailpointLog,
		healthTimeout: cfg.HealthTimeout}
	if t.healthTimeout <= 0 {
		t.healthTimeout = DefaultHealthTimeout
	}
	if err := t.start(ctx, sc); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

// Crashes counts the instances that died by themselves so far.
func (t *Target) Crashes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.crashes
}

func (t *Target) specFor(in *instance) supervisor.Spec {
	envv := append([]string(nil), in.baseEnv...)
	var fps []string
	for name, act := range in.armed {
		fps = append(fps, name+"="+act)
	}
	sort.Strings(fps)
	envv = append(envv, "SAGACHAOS_FAILPOINTS="+strings.Join(fps, ";"))
	cmd := make([]string, len(in.process.Command))
	for i, a := range in.process.Command {
		cmd[i], _ = t.fill(a, in)
	}
	health := ""
	if in.process.Health != "" {
		health = "http://" + in.listen + in.process.Health
	}
	return supervisor.Spec{Name: in.name, Command: cmd, Env: envv, Dir: t.runDir, LogDir: t.runDir, HealthURL: health}
}

// start brings every instance up and waits until each is healthy.
func (t *Target) start(ctx context.Context, sc scenarios.Scenario) error {
	t.instances = map[string]*instance{}
	for _, p := range t.m.Processes {
		n := p.Replicas
		if r, ok := sc.Replicas[p.Name]; ok {
			n = r
		}
		for _, name := range scenarios.Instances(p.Name, n) {
			addr, err := freeAddr()
			if err != nil {
				return fmt.Errorf("allocate a port for %s: %w", name, err)
			}
			in := &instance{name: name, process: p, listen: addr, armed: map[string]string{}}
			// Links are created up front, in a stable order, so every link a
			// scenario may name exists even if no template asked for it.
			for _, d := range p.Depends {
				switch d {
				case "postgres":
					if _, err := t.env.PostgresLink(name); err != nil {
						return err
					}
				case "kafka":
					if _, err := t.env.KafkaBrokersFor(name); err != nil {
						return err
					}
				}
			}
			keys := make([]string, 0, len(p.Env))
			for k := range p.Env {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v, err := t.fill(p.Env[k], in)
				if err != nil {
					return fmt.Errorf("manifest %s: process %s: env %s: %w", t.m.Name, p.Name, k, err)
				}
				in.baseEnv = append(in.baseEnv, k+"="+v)
			}
			in.baseEnv = append(in.baseEnv,
				"SAGACHAOS_INSTANCE="+name,
				"SAGACHAOS_MUTANT="+t.mutant,
				"SAGACHAOS_FAILPOINT_LOG="+t.fpLog,
				"LISTEN_ADDR="+addr,
			)
			t.instances[name] = in
			t.order = append(t.order, name)
		}
	}
	for _, f := range sc.Faults {
		if f.Kind != scenarios.FaultFailpoint {
			continue
		}
		in := t.instances[f.Params["component"]]
		if in == nil {
			return fmt.Errorf("fault %s arms failpoint %s on %q, which the target does not run", f.ID, f.Target, f.Params["component"])
		}
		act := f.Params["action"]
		if h := f.Params["hit"]; h != "" {
			act += "@" + h
		}
		in.armed[f.Target] = act
	}
	// Start everything, then wait: components wait for each other's topics
	// and databases, not for each other.
	for _, name := range t.order {
		if err := t.startInstance(ctx, t.instances[name], false); err != nil {
			return err
		}
	}
	for _, name := range t.order {
		in := t.instances[name]
		t.mu.Lock()
		p := in.proc
		t.mu.Unlock()
		if err := t.sup.WaitHealthy(ctx, p, t.healthTimeout); err != nil {
			return &Error{Err: fmt.Errorf("%s never became healthy: %w", name, err)}
		}
	}
	return nil
}

func (t *Target) startInstance(ctx context.Context, in *instance, wait bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errors.New("target is shutting down")
	}
	spec := t.specFor(in)
	in.starts++
	t.mu.Unlock()
	p, err := t.sup.Start(ctx, spec)
	if err != nil {
		return &Error{Err: fmt.Errorf("start %s: %w", in.name, err)}
	}
	t.mu.Lock()
	in.proc = p
	in.killing = false
	t.mu.Unlock()
	t.wg.Add(1)
	go t.watch(in, p)
	if wait {
		if err := t.sup.WaitHealthy(ctx, p, t.healthTimeout); err != nil {
			return fmt.Errorf("%s not healthy after restart: %w", in.name, err)
		}
	}
	return nil
}

// watch notices an instance that died by itself (a failpoint crash, a
// panic), journals it, disarms its failpoints and restarts it: a crashed
// component coming back is part of every fault model we test.
func (t *Target) watch(in *instance, p *supervisor.Proc) {
	defer t.wg.Done()
	<-p.Exited()
	t.mu.Lock()
	if t.closed || in.proc != p || in.killing {
		t.mu.Unlock()
		return
	}
	t.crashes++
	id := fmt.Sprintf("crash%d", t.crashes)
	armed := in.armed
	in.armed = map[string]string{}
	t.mu.Unlock()
	var names []string
	for n := range armed {
		names = append(names, n)
	}
	sort.Strings(names)
	t.rec.Record(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: id, Kind: "crash", Phase: models.PhaseInstant, Target: in.name,
		Detail: map[string]string{"exit": p.ExitStatus(), "armed_failpoints": strings.Join(names, ",")}})
	t.log.Info("component crashed; restarting", "instance", in.name, "exit", p.ExitStatus())
	for attempt := 1; attempt <= 5; attempt++ {
		time.Sleep(200 * time.Millisecond * time.Duration(attempt))
		ctx, cancel := context.WithTimeout(context.Background(), t.healthTimeout)
		started, err := t.replace(ctx, in, p)
		cancel()
		if err == nil {
			if started {
				t.rec.Record(models.ProcNemesis, models.Info, "restart", "", models.FaultRecord{ID: id, Kind: "restart", Phase: models.PhaseInstant, Target: in.name})
			}
			return
		}
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if closed {
			return
		}
		t.log.Warn("restart after crash failed", "instance", in.name, "attempt", attempt, "err", err)
	}
}

func (t *Target) lookup(name string) (*instance, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.instances[name]
	if in == nil {
		return nil, fmt.Errorf("no component %q", name)
	}
	return in, nil
}

// Kill SIGKILLs an instance on purpose (the nemesis will restart it).
func (t *Target) Kill(ctx context.Context, name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	t.mu.Lock()
	in.killing = true
	p := in.proc
	t.mu.Unlock()
	return p.Kill()
}

// Restart starts an instance again and waits until it is healthy.
func (t *Target) Restart(ctx context.Context, name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	t.mu.Lock()
	p := in.proc
	t.mu.Unlock()
	_, err = t.replace(ctx, in, p)
	return err
}

// replace starts a new incarnation of in if its current one is still stale
// (killing stale first if it lives). It reports whether it started one: a
// caller that lost the race to another restarter starts nothing.
func (t *Target) replace(ctx context.Context, in *instance, stale *supervisor.Proc) (bool, error) {
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	current := in.proc
	t.mu.Unlock()
	if current != stale {
		return false, nil
	}
	if stale != nil && stale.Alive() {
		t.mu.Lock()
		in.killing = true
		t.mu.Unlock()
		_ = stale.Kill()
	}
	return true, t.startInstance(ctx, in, true)
}

// Pause SIGSTOPs an instance.
func (t *Target) Pause(name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	return in.proc.Pause()
}

// Resume SIGCONTs an instance.
func (t *Target) Resume(name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	return in.proc.Resume()
}

// Heal resumes every instance and restarts any that is not running, then
// waits until every instance is healthy.
func (t *Target) Heal(ctx context.Context) error {
	var errs []error
	for _, name := range t.order {
		in, _ := t.lookup(name)
		t.mu.Lock()
		p := in.proc
		t.mu.Unlock()
		_ = p.Resume()
		if !p.Alive() {
			// If the crash watcher got there first, replace starts nothing.
			if _, err := t.replace(ctx, in, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Wait for every instance to be healthy again (restarts by the watcher
	// included).
	for _, name := range t.order {
		in, _ := t.lookup(name)
		t.mu.Lock()
		p := in.proc
		t.mu.Unlock()
		if err := t.sup.WaitHealthy(ctx, p, t.healthTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Stop kills every instance and waits for the watchers. It is idempotent.
func (t *Target) Stop() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	_ = t.sup.KillAll()
	t.wg.Wait()
}

// APIAddr is the host:port of the workload API, directly (not through the
// client link).
func (t *Target) APIAddr() string {
	in := t.instances[t.m.API.Process]
	if in == nil {
		// A replicated API process: use the first instance.
		for _, name := range t.order {
			if t.instances[name].process.Name == t.m.API.Process {
				return t.instances[name].listen
			}
		}
	}
	return in.listen
}
