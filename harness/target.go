package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/supervisor"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// defaultHealthTimeout bounds how long one instance may take to become
// healthy.
const defaultHealthTimeout = 30 * time.Second

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

// target is the system under test, started from its manifest.
type target struct {
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

// TargetError is a target that could not be started: exit code 2, never a
// verdict.
type TargetError struct{ Err error }

func (e *TargetError) Error() string { return "target: " + e.Err.Error() }
func (e *TargetError) Unwrap() error { return e.Err }

var templateRE = regexp.MustCompile(`\{\{([a-z]+)(?::([A-Za-z0-9_.-]+))?\}\}`)

// Component ports come from a range below the kernel's ephemeral range
// (32768–60999 by default). A port picked with ":0" and released for the
// child to bind is in the range every outgoing connection draws its source
// port from, and under load one of them takes it first ("address already in
// use" at start, seen in CI-like parallel runs). Each harness process starts
// at a pid-derived offset, so concurrent runs rarely probe the same ports.
const (
	portBase  = 20000
	portRange = 10000
)

var nextPort atomic.Int64

func init() { nextPort.Store(int64(os.Getpid()*7919) % portRange) }

func freeAddr() (string, error) {
	for i := 0; i < portRange; i++ {
		port := portBase + int(nextPort.Add(1)%portRange)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free port in 127.0.0.1:%d-%d", portBase, portBase+portRange-1)
}

// fill replaces the manifest templates of docs/target-contract.md for one
// instance, creating the instance's own links on the way.
func (t *target) fill(s string, in *instance) (string, error) {
	var ferr error
	out := templateRE.ReplaceAllStringFunc(s, func(m string) string {
		g := templateRE.FindStringSubmatch(m)
		kind, arg := g[1], g[2]
		depends := func(d string) bool {
			for _, x := range in.process.Depends {
				if x == d {
					return true
				}
			}
			ferr = fmt.Errorf("process %s uses %s but does not list %q in depends", in.process.Name, m, d)
			return false
		}
		switch kind {
		case "listen":
			return in.listen
		case "instance":
			return in.name
		case "bin":
			return t.bin
		case "stock":
			b, _ := json.Marshal(t.stock)
			return string(b)
		case "topic":
			return t.env.TopicName(arg)
		case "db":
			if !depends("postgres") {
				return m
			}
			dsn, err := t.env.ProxiedDSN(in.name, arg)
			if err != nil {
				ferr = err
			}
			return dsn
		case "kafka":
			if !depends("kafka") {
				return m
			}
			bs, err := t.env.KafkaBrokersFor(in.name)
			if err != nil {
				ferr = err
			}
			return strings.Join(bs, ",")
		case "url":
			if !depends(arg) {
				return m
			}
			var upstream string
			switch arg {
			case "gateway":
				upstream = t.world.Gateway.Addr()
			case "carrier":
				upstream = t.world.Carrier.Addr()
			case "mailer":
				upstream = t.world.Mailer.Addr()
			default:
				ferr = fmt.Errorf("unknown world service in %s", m)
				return m
			}
			l, err := t.env.NewLink(scenarios.LinkName(in.name, arg), upstream)
			if err != nil {
				ferr = err
				return m
			}
			return "http://" + l.Listen()
		}
		ferr = fmt.Errorf("unknown template %s", m)
		return m
	})
	return out, ferr
}

func (t *target) specFor(in *instance) supervisor.Spec {
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
func (t *target) start(ctx context.Context, sc scenarios.Scenario) error {
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
			return &TargetError{Err: fmt.Errorf("%s never became healthy: %w", name, err)}
		}
	}
	return nil
}

func (t *target) startInstance(ctx context.Context, in *instance, wait bool) error {
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
		return &TargetError{Err: fmt.Errorf("start %s: %w", in.name, err)}
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
func (t *target) watch(in *instance, p *supervisor.Proc) {
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

func (t *target) lookup(name string) (*instance, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.instances[name]
	if in == nil {
		return nil, fmt.Errorf("no component %q", name)
	}
	return in, nil
}

// Kill SIGKILLs an instance on purpose (the nemesis will restart it).
func (t *target) Kill(ctx context.Context, name string) error {
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
func (t *target) Restart(ctx context.Context, name string) error {
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
func (t *target) replace(ctx context.Context, in *instance, stale *supervisor.Proc) (bool, error) {
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
func (t *target) Pause(name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	return in.proc.Pause()
}

// Resume SIGCONTs an instance.
func (t *target) Resume(name string) error {
	in, err := t.lookup(name)
	if err != nil {
		return err
	}
	return in.proc.Resume()
}

// heal resumes every instance and restarts any that is not running.
func (t *target) heal(ctx context.Context) error {
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

// stop kills every instance and waits for the watchers.
func (t *target) stop() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	_ = t.sup.KillAll()
	t.wg.Wait()
}

// apiURL is the workload API, directly (not through the client link).
func (t *target) apiAddr() string {
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

// failpointCatalog runs the manifest's failpoint listing command.
func failpointCatalog(ctx context.Context, m *targets.Manifest, bin string) ([]targets.Failpoint, error) {
	if len(m.Failpoints) == 0 {
		return nil, nil
	}
	args := make([]string, len(m.Failpoints))
	for i, a := range m.Failpoints {
		args[i] = strings.ReplaceAll(a, "{{bin}}", bin)
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
	if err != nil {
		return nil, &TargetError{Err: fmt.Errorf("list failpoints (%s): %w", strings.Join(args, " "), err)}
	}
	var fps []targets.Failpoint
	if err := json.Unmarshal(out, &fps); err != nil {
		return nil, &TargetError{Err: fmt.Errorf("list failpoints: output is not a JSON []Failpoint: %w", err)}
	}
	return fps, nil
}

// buildTarget runs the manifest's build command from the module root above
// the manifest, writing binaries to bin.
func buildTarget(ctx context.Context, m *targets.Manifest, bin string) error {
	if m.Build == nil || len(m.Build.Command) == 0 {
		return nil
	}
	root, err := moduleRoot(m.Dir)
	if err != nil {
		return &TargetError{Err: err}
	}
	args := make([]string, len(m.Build.Command))
	for i, a := range m.Build.Command {
		args[i] = strings.ReplaceAll(a, "{{bin}}", bin)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &TargetError{Err: fmt.Errorf("build %s (%s): %w: %s", m.Name, strings.Join(args, " "), err, firstLine(string(out)))}
	}
	return nil
}

func moduleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above %s to build the target from", dir)
		}
		d = parent
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
