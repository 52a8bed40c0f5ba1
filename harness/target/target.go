// Package target is the target stage of the loop: it turns a manifest into
// running components — templating each instance's env and links, starting
// it as a real process, waiting until it is healthy — and keeps them
// running: a component that dies by itself is journaled and restarted. The
// nemesis stops, pauses and starts instances through it; those holds are
// reference-counted per fault, so overlapping faults on one instance
// compose. Every start, healthy and exit of an incarnation is a
// component/<instance> op, and every line of the failpoint log is copied
// into the history as a failpoint op as it is written. The package also
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
	"github.com/sagachaos/sagachaos/scenarios/faults"
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

// armedFault is one failpoint fault armed on an instance.
type armedFault struct {
	id, point, action string
	hit               int
	fired             bool
}

// entry is the fault's SAGACHAOS_FAILPOINTS entry.
func (a *armedFault) entry() string { return fmt.Sprintf("%s=%s@%d", a.point, a.action, a.hit) }

// instance is one component instance across its incarnations. Every
// mutable field is guarded by Target.mu.
type instance struct {
	name    string
	process targets.Process
	listen  string
	command []string
	baseEnv []string // filled templates, without failpoints
	armed   []*armedFault

	proc        *supervisor.Proc
	incarnation int
	// exitCause is why the harness is ending the current incarnation
	// ("fault:f2", "harness"); empty: an exit is a crash.
	exitCause string
	downBy    []string // faults holding the instance down
	pausedBy  []string // faults holding it paused

	// replaceMu serialises everything that replaces or signals the
	// incarnation: the crash watcher, the nemesis and the heal step.
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
	// resources are the initial amounts of the counted resources
	// ({{resource:NAME}}).
	resources map[string]map[string]int64
	// healthTimeout bounds how long one instance may take to become healthy.
	healthTimeout time.Duration
	fp            *failpointLog

	// done is closed by Close: crash restarts waiting out a backoff give up.
	done chan struct{}
	// unabort unregisters the abort hook that kills every process on a
	// second Ctrl-C.
	unabort func()
	wg      sync.WaitGroup

	mu        sync.Mutex
	instances map[string]*instance
	order     []string
	crashes   int
	closed    bool
}

// Error is a target that could not be built or started: exit code 2,
// never a verdict.
type Error struct{ Err error }

func (e *Error) Error() string { return "target: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Start brings every instance of the scenario up (replicas as the scenario
// says, failpoint faults armed in their instances' environment) and waits
// until each is healthy. It first records the target op (models.TargetDecl):
// what the manifest declares that checkers need. On an error it stops
// whatever it started.
func Start(ctx context.Context, cfg Config, sc scenarios.Scenario) (*Target, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	t := &Target{m: cfg.Manifest, sup: supervisor.New(log), env: cfg.Env, world: cfg.World, rec: cfg.Rec, log: log,
		bin: cfg.Bin, runDir: cfg.RunDir, mutant: cfg.Mutant, resources: sc.Workload.Resources,
		healthTimeout: cfg.HealthTimeout, done: make(chan struct{}), instances: map[string]*instance{}}
	if t.healthTimeout <= 0 {
		t.healthTimeout = DefaultHealthTimeout
	}
	t.fp = newFailpointLog(cfg.FailpointLog, t.onFailpointLine)
	t.unabort = supervisor.OnAbort(func() { _ = t.sup.KillAll() })
	if err := t.start(ctx, sc); err != nil {
		t.Close()
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

// specFor is the spec of the next incarnation: every failpoint fault armed
// on the instance that has not fired yet. Caller holds t.mu.
func (t *Target) specFor(in *instance) supervisor.Spec {
	envv := append([]string(nil), in.baseEnv...)
	var fps []string
	for _, a := range in.armed {
		if !a.fired {
			fps = append(fps, a.entry())
		}
	}
	envv = append(envv, "SAGACHAOS_FAILPOINTS="+strings.Join(fps, ";"))
	health := ""
	if in.process.Health != "" {
		health = "http://" + in.listen + in.process.Health
	}
	return supervisor.Spec{Name: in.name, Command: in.command, Env: envv, Dir: t.runDir, LogDir: t.runDir, HealthURL: health}
}

// start sets up every instance, arms the failpoint faults, starts
// everything, then waits: components wait for each other's topics and
// databases, not for each other.
func (t *Target) start(ctx context.Context, sc scenarios.Scenario) error {
	decl := models.TargetDecl{Name: t.m.Name}
	for _, p := range t.m.Processes {
		n := p.Replicas
		if r, ok := sc.Replicas[p.Name]; ok {
			n = r
		}
		names := scenarios.Instances(p.Name, n)
		for _, name := range names {
			in, err := t.setup(p, name)
			if err != nil {
				return err
			}
			t.instances[name] = in
			t.order = append(t.order, name)
		}
		decl.Instances = append(decl.Instances, names...)
		if p.Role == "relay" {
			decl.Relays = append(decl.Relays, names...)
		}
		for _, c := range p.Consumes {
			cd := models.ConsumerDecl{Process: p.Name, Instances: names, Consumer: c.Consumer, Group: c.Group, Types: c.Types}
			for _, tp := range c.Topics {
				cd.Topics = append(cd.Topics, t.env.TopicName(tp))
			}
			decl.Consumers = append(decl.Consumers, cd)
		}
	}
	t.m.Declare(&decl) // the domain: the saga (or outbox-only), resources, seq source
	t.rec.Record(models.ProcHarness, models.Info, models.FTarget, "", decl)
	if err := t.arm(sc.Faults); err != nil {
		return err
	}
	t.fp.start()
	for _, name := range t.order {
		if err := t.startInstance(ctx, t.instances[name], "initial", false); err != nil {
			return err
		}
	}
	for _, name := range t.order {
		in := t.instances[name]
		t.mu.Lock()
		p, n := in.proc, in.incarnation
		t.mu.Unlock()
		if err := t.waitHealthy(ctx, in, p, n); err != nil {
			return &Error{Err: fmt.Errorf("%s never became healthy: %w", name, err)}
		}
	}
	return nil
}

// setup templates one instance and creates its links, in a stable order, so
// every link a scenario may name exists even if no template asked for it.
func (t *Target) setup(p targets.Process, name string) (*instance, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("allocate a port for %s: %w", name, err)
	}
	in := &instance{name: name, process: p, listen: addr}
	for _, d := range p.Depends {
		switch d {
		case "postgres":
			if _, err := t.env.PostgresLink(name); err != nil {
				return nil, err
			}
		case "kafka":
			if _, err := t.env.KafkaBrokersFor(name); err != nil {
				return nil, err
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
			return nil, fmt.Errorf("manifest %s: process %s: env %s: %w", t.m.Name, p.Name, k, err)
		}
		in.baseEnv = append(in.baseEnv, k+"="+v)
	}
	in.baseEnv = append(in.baseEnv,
		"SAGACHAOS_INSTANCE="+name,
		"SAGACHAOS_MUTANT="+t.mutant,
		"SAGACHAOS_FAILPOINT_LOG="+t.fp.path,
		"LISTEN_ADDR="+addr,
	)
	in.command = make([]string, len(p.Command))
	for i, a := range p.Command {
		if in.command[i], err = t.fill(a, in); err != nil {
			return nil, fmt.Errorf("manifest %s: process %s: command: %w", t.m.Name, p.Name, err)
		}
	}
	return in, nil
}

// arm arms every fault whose kind is armed in the environment before start.
func (t *Target) arm(plan []scenarios.Fault) error {
	for _, f := range plan {
		k, err := f.Spec()
		if err != nil {
			return fmt.Errorf("fault %s: %w", f.ID, err)
		}
		sa, ok := k.(faults.StartArmed)
		if !ok {
			continue
		}
		inst, point, action, hit := sa.Arm(f.View())
		in := t.instances[inst]
		if in == nil {
			return fmt.Errorf("fault %s arms failpoint %s on %q, which the target does not run", f.ID, point, inst)
		}
		in.armed = append(in.armed, &armedFault{id: f.ID, point: point, action: action, hit: hit})
	}
	return nil
}

// startInstance starts a new incarnation of in, recording its start op
// (and, with wait, its healthy op once it answers).
func (t *Target) startInstance(ctx context.Context, in *instance, cause string, wait bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errors.New("target is shutting down")
	}
	spec := t.specFor(in)
	in.incarnation++
	n := in.incarnation
	t.mu.Unlock()
	p, err := t.sup.Start(ctx, spec)
	if err != nil {
		return &Error{Err: fmt.Errorf("start %s: %w", in.name, err)}
	}
	t.component(in.name, models.FComponentStart, models.ComponentEvent{Incarnation: n, Pid: p.Pid(), Cause: cause})
	t.mu.Lock()
	in.proc, in.exitCause = p, ""
	t.mu.Unlock()
	t.wg.Add(1)
	go t.watch(in, p, n)
	if wait {
		if err := t.waitHealthy(ctx, in, p, n); err != nil {
			return fmt.Errorf("%s not healthy after restart: %w", in.name, err)
		}
	}
	return nil
}

func (t *Target) waitHealthy(ctx context.Context, in *instance, p *supervisor.Proc, n int) error {
	start := time.Now()
	if err := t.sup.WaitHealthy(ctx, p, t.healthTimeout); err != nil {
		return err
	}
	t.component(in.name, models.FComponentHealthy, models.ComponentEvent{Incarnation: n, WaitedMS: time.Since(start).Milliseconds()})
	return nil
}

func (t *Target) component(name, f string, ev models.ComponentEvent) {
	ev.Instance = name
	t.rec.Record(models.ProcComponentPrefix+name, models.Info, f, "", ev)
}

// watch records the exit of one incarnation. An exit nobody caused (a
// failpoint crash, a panic) is journaled as a crash and restarted: a
// crashed component coming back is part of every fault model we test.
// Failpoint faults that have not fired stay armed in the next incarnation.
func (t *Target) watch(in *instance, p *supervisor.Proc, n int) {
	defer t.wg.Done()
	<-p.Exited()
	t.mu.Lock()
	cause, closed := in.exitCause, t.closed
	if closed && cause == "" {
		cause = "harness"
	}
	t.mu.Unlock()
	t.component(in.name, models.FComponentExit, models.ComponentEvent{Incarnation: n, Status: p.ExitStatus(), Expected: cause != "", Cause: cause})
	if cause != "" {
		return
	}
	// The line of a failpoint that crashed the process was written before
	// it died: read it now, so the next incarnation is armed without it.
	fired := t.fp.drain()
	t.mu.Lock()
	t.crashes++
	id := fmt.Sprintf("crash%d", t.crashes)
	var firedIDs []string
	for _, a := range in.armed {
		if a.fired && fired[a.id] {
			firedIDs = append(firedIDs, a.id)
		}
	}
	t.mu.Unlock()
	t.rec.Record(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: id, Kind: "crash", Phase: models.PhaseInstant, Target: in.name,
		Detail: map[string]string{"exit": p.ExitStatus(), "fired": strings.Join(firedIDs, ",")}})
	t.log.Info("component crashed; restarting", "instance", in.name, "exit", p.ExitStatus())
	for attempt := 1; attempt <= 5; attempt++ {
		select {
		case <-t.done:
			return
		case <-time.After(200 * time.Millisecond * time.Duration(attempt)):
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.healthTimeout)
		started, err := t.restartCrashed(ctx, in, p)
		cancel()
		if err == nil {
			if started {
				t.rec.Record(models.ProcNemesis, models.Info, "restart", "", models.FaultRecord{ID: id, Kind: "restart", Phase: models.PhaseInstant, Target: in.name})
			}
			return
		}
		if t.isClosed() {
			return
		}
		t.log.Warn("restart after crash failed", "instance", in.name, "attempt", attempt, "err", err)
	}
}

// restartCrashed starts a new incarnation of a crashed instance unless
// another restarter got there first or a fault holds it down (the last
// release starts it). It reports whether it started one.
func (t *Target) restartCrashed(ctx context.Context, in *instance, crashed *supervisor.Proc) (bool, error) {
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	skip := in.proc != crashed || len(in.downBy) > 0
	t.mu.Unlock()
	if skip {
		return false, nil
	}
	if err := t.startInstance(ctx, in, "crash-restart", true); err != nil {
		return true, err
	}
	return true, t.repause(in)
}

// repause stops a fresh incarnation again while faults hold it paused.
// Caller holds in.replaceMu.
func (t *Target) repause(in *instance) error {
	t.mu.Lock()
	held, p := len(in.pausedBy) > 0, in.proc
	t.mu.Unlock()
	if !held {
		return nil
	}
	return p.Pause()
}

func (t *Target) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
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

// hold adds id to a hold list and returns the other holders.
func hold(by *[]string, id string) []string {
	others := append([]string(nil), (*by)...)
	*by = append(*by, id)
	return others
}

// release removes id from a hold list and returns the holders left.
func release(by *[]string, id string) []string {
	kept := (*by)[:0]
	for _, x := range *by {
		if x != id {
			kept = append(kept, x)
		}
	}
	*by = kept
	return append([]string(nil), kept...)
}

// Stop implements faults.Components: it holds the instance down for fault
// id, SIGKILLing it if it runs.
func (t *Target) Stop(ctx context.Context, name, id string) (faults.Outcome, error) {
	in, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	others := hold(&in.downBy, id)
	p := in.proc
	alive := p.Alive()
	if alive && len(others) == 0 {
		in.exitCause = "fault:" + id
	}
	t.mu.Unlock()
	switch {
	case len(others) > 0:
		return "already down: held by " + strings.Join(others, ","), nil
	case !alive:
		return "already down: " + p.ExitStatus(), nil
	}
	if err := p.Kill(); err != nil {
		t.mu.Lock()
		release(&in.downBy, id)
		t.mu.Unlock()
		return "", err
	}
	return "killed", nil
}

// Start implements faults.Components: it releases fault id's hold; the
// last release starts the instance again and waits until it is healthy.
func (t *Target) Start(ctx context.Context, name, id string) (faults.Outcome, error) {
	in, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	left := release(&in.downBy, id)
	p := in.proc
	t.mu.Unlock()
	switch {
	case len(left) > 0:
		return "still down: held by " + strings.Join(left, ","), nil
	case p.Alive():
		return "already running", nil
	}
	if err := t.startInstance(ctx, in, "fault:"+id, true); err != nil {
		return "", err
	}
	t.mu.Lock()
	paused := append([]string(nil), in.pausedBy...)
	t.mu.Unlock()
	if len(paused) > 0 {
		if err := t.repause(in); err != nil {
			return "restarted", err
		}
		return "restarted, paused again: held by " + strings.Join(paused, ","), nil
	}
	return "restarted", nil
}

// Pause implements faults.Components: it holds the instance paused
// (SIGSTOP) for fault id.
func (t *Target) Pause(name, id string) (faults.Outcome, error) {
	in, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	others := hold(&in.pausedBy, id)
	p := in.proc
	t.mu.Unlock()
	switch {
	case len(others) > 0:
		return "already paused: held by " + strings.Join(others, ","), nil
	case !p.Alive():
		return "not running: nothing to pause", nil
	}
	if err := p.Pause(); err != nil {
		t.mu.Lock()
		release(&in.pausedBy, id)
		t.mu.Unlock()
		return "", err
	}
	return "paused", nil
}

// Resume implements faults.Components: it releases fault id's pause; the
// last release resumes the instance (SIGCONT).
func (t *Target) Resume(name, id string) (faults.Outcome, error) {
	in, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	in.replaceMu.Lock()
	defer in.replaceMu.Unlock()
	t.mu.Lock()
	left := release(&in.pausedBy, id)
	p := in.proc
	t.mu.Unlock()
	switch {
	case len(left) > 0:
		return "still paused: held by " + strings.Join(left, ","), nil
	case !p.Alive():
		return "not running: nothing to resume", nil
	}
	if err := p.Resume(); err != nil {
		return "", err
	}
	return "resumed", nil
}

// Armed implements faults.Failpoints.
func (t *Target) Armed(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range t.order {
		for _, a := range t.instances[name].armed {
			if a.id == id {
				return name, true
			}
		}
	}
	return "", false
}

// Groups returns the consumer groups the process of instance declares and
// every instance of that process.
func (t *Target) Groups(instance string) (groups, instances []string, err error) {
	in, err := t.lookup(instance)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range in.process.Consumes {
		if c.Group != "" {
			groups = append(groups, c.Group)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range t.order {
		if t.instances[name].process.Name == in.process.Name {
			instances = append(instances, name)
		}
	}
	return groups, instances, nil
}

// Heal drops every fault's hold, resumes every instance and restarts any
// that is not running, then waits until every instance is healthy. It
// returns who is healthy, for the healed op.
func (t *Target) Heal(ctx context.Context) (models.Healed, error) {
	var errs []error
	restarted := map[string]bool{}
	for _, name := range t.order {
		in, _ := t.lookup(name)
		in.replaceMu.Lock()
		t.mu.Lock()
		in.downBy, in.pausedBy = nil, nil
		p := in.proc
		t.mu.Unlock()
		_ = p.Resume()
		if !p.Alive() {
			if err := t.startInstance(ctx, in, "heal", false); err != nil {
				errs = append(errs, err)
			} else {
				restarted[name] = true
			}
		}
		in.replaceMu.Unlock()
	}
	healed := models.Healed{Errors: map[string]string{}}
	for _, name := range t.order {
		in, _ := t.lookup(name)
		in.replaceMu.Lock()
		t.mu.Lock()
		p, n := in.proc, in.incarnation
		t.mu.Unlock()
		var err error
		if restarted[name] {
			err = t.waitHealthy(ctx, in, p, n)
		} else {
			err = t.sup.WaitHealthy(ctx, p, t.healthTimeout)
		}
		in.replaceMu.Unlock()
		if err != nil {
			healed.Unhealthy = append(healed.Unhealthy, name)
			healed.Errors[name] = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		healed.Healthy = append(healed.Healthy, name)
	}
	if len(healed.Errors) == 0 {
		healed.Errors = nil
	}
	return healed, errors.Join(errs...)
}

// Close kills every instance, waits for the watchers and copies what is
// left of the failpoint log into the history. It is idempotent.
func (t *Target) Close() {
	t.mu.Lock()
	already := t.closed
	t.closed = true
	t.mu.Unlock()
	if !already {
		close(t.done)
	}
	_ = t.sup.KillAll()
	t.wg.Wait()
	t.fp.stop()
	t.unabort()
}

// APIAddr is the host:port of the workload API, directly (not through the
// client link): the API process, or its first instance when replicated.
func (t *Target) APIAddr() string {
	for _, name := range t.order {
		if in := t.instances[name]; in.process.Name == t.m.API.Process {
			return in.listen
		}
	}
	return ""
}

// onFailpointLine copies one failpoint log line into the history; a line
// that says an armed action ran marks the fault it belongs to as fired and
// journals it. It reports the id of that fault ("" for none).
func (t *Target) onFailpointLine(ev models.FailpointEvent) string {
	op := t.rec.Record(models.ProcComponentPrefix+ev.Instance, models.Info, models.FFailpoint, "", ev)
	if !ev.Fired {
		return ""
	}
	t.mu.Lock()
	var hit *armedFault
	if in := t.instances[ev.Instance]; in != nil {
		for _, a := range in.armed {
			if !a.fired && a.point == ev.Failpoint && a.hit == ev.Hit && actionKind(a.action) == ev.Action {
				hit = a
				break
			}
		}
	}
	if hit != nil {
		hit.fired = true
	}
	t.mu.Unlock()
	if hit == nil {
		return ""
	}
	t.rec.Record(models.ProcNemesis, models.Info, "failpoint", "", models.FaultRecord{ID: hit.id, Kind: "failpoint", Phase: models.PhaseFired, Target: ev.Failpoint,
		Detail: map[string]string{"effect": "fired", "instance": ev.Instance, "action": ev.Action, "hit": fmt.Sprint(ev.Hit), "op": fmt.Sprint(op.I)}})
	return hit.id
}

// actionKind is what the failpoint log calls an action: "sleep(2s)" logs
// as "sleep".
func actionKind(action string) string {
	k, _, _ := strings.Cut(action, "(")
	return k
}
