package env

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/modules/redpanda"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sagachaos/sagachaos/harness/supervisor"
)

// The images a user with a registry gets. Where no registry is reachable,
// build one locally (scripts/pg-image.sh makes a PostgreSQL image from the
// host's Debian package) and pass it with --postgres-image.
const (
	DefaultPostgresImage = "postgres:15-alpine"
	DefaultKafkaImage    = "docker.redpanda.com/redpandadata/redpanda:v24.1.1"
)

// Labels on every container and network the harness starts: the reaper and
// the stale-run sweep find them by these, and `docker ps --filter
// label=sagachaos.run=ID` shows one run's.
const (
	LabelRun  = "sagachaos.run"  // the Env's run id
	LabelPid  = "sagachaos.pid"  // the harness's pid
	LabelHost = "sagachaos.host" // the harness's host name
)

// EnvRyukDisabled is testcontainers' switch for its reaper container (Ryuk),
// an image that cannot be pulled without a registry. The harness removes its
// containers itself (supervisor.Reaper plus a sweep of dead runs), so it
// turns Ryuk off unless the variable is set.
const EnvRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"

// docker is what a testcontainers provider holds besides its container: a
// client of the engine, the run's labels, and a reaper process that removes
// the run's containers if the harness dies without closing the Env.
type docker struct {
	cli    client.APIClient
	host   string
	label  string // LabelRun=runID
	labels map[string]string
	reaper *supervisor.Reaper
	log    *slog.Logger
}

// dockerUp checks up front that testcontainers can reach Docker, so a
// missing engine is one line, not a stack of container errors; then it
// sweeps containers of dead harnesses and starts the reaper.
func dockerUp(ctx context.Context, what, runID string, log *slog.Logger) (*docker, error) {
	if _, set := os.LookupEnv(EnvRyukDisabled); !set {
		_ = os.Setenv(EnvRyukDisabled, "true")
	}
	// Some of testcontainers' lines (the engine banner) go to its default
	// logger whatever the options say.
	tclog.SetDefault(tcLogger{log})
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			if _, err2 := os.Stat(os.ExpandEnv("$XDG_RUNTIME_DIR/docker.sock")); err2 != nil {
				return nil, unavailable(what+": testcontainers selected but Docker is not reachable (no DOCKER_HOST, no /var/run/docker.sock)",
					"start Docker (here: eval \"$(scripts/docker-up.sh)\") or use the embedded default", nil)
			}
		}
	}
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(tcLogger{log}))
	if err != nil {
		return nil, unavailable(what+": testcontainers selected but Docker is not reachable", "start Docker or use the embedded default", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(cctx); err != nil {
		p.Close()
		return nil, unavailable(what+": testcontainers selected but Docker is not healthy", "start Docker or use the embedded default", err)
	}
	host, _ := os.Hostname()
	d := &docker{cli: p.Client(), host: p.Client().DaemonHost(), label: LabelRun + "=" + runID, log: log,
		labels: map[string]string{LabelRun: runID, LabelPid: strconv.Itoa(os.Getpid()), LabelHost: host}}
	d.sweep(ctx, host)
	r, err := supervisor.StartReaper()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	// Registered before anything is created: a harness killed while a
	// container starts still has it removed.
	if err := r.AddDockerLabel(d.host, d.label); err != nil {
		_ = r.Stop()
		p.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	d.reaper = r
	return d, nil
}

// sweep removes containers and networks that harnesses on this host left
// behind when they died and their reaper could not run (no docker CLI, or
// the reaper was killed too): their sagachaos.pid is no longer alive.
func (d *docker) sweep(ctx context.Context, host string) {
	f := make(client.Filters).Add("label", LabelHost+"="+host)
	dead := func(labels map[string]string) bool {
		pid, err := strconv.Atoi(labels[LabelPid])
		return err == nil && pid != os.Getpid() && !alive(pid)
	}
	if cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			if dead(c.Labels) {
				if _, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err == nil {
					d.log.Info("removed container of a dead harness", "id", c.ID[:12], "run", c.Labels[LabelRun], "pid", c.Labels[LabelPid])
				}
			}
		}
	}
	if ns, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			if dead(n.Labels) {
				_, _ = d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

// image makes sure img is on the engine: present, or pulled now. A pull that
// fails is one line that says what to do (exit code 2), not a retry loop.
func (d *docker) image(ctx context.Context, what, img, flag, fix string) error {
	if _, err := d.cli.ImageInspect(ctx, img); err == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	resp, err := d.cli.ImagePull(pctx, img, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(pctx)
		_ = resp.Close()
	}
	if err != nil {
		return unavailable(fmt.Sprintf("%s: testcontainers image %s is not on the Docker engine and cannot be pulled", what, img),
			fix+", pass "+flag+" IMAGE, or use the embedded default", firstLine(err))
	}
	return nil
}

// close stops the reaper. removed says the run's containers are gone (then
// the reaper is told so and exits at once); otherwise the reaper removes
// whatever carries the run's label before it exits.
func (d *docker) close(removed bool) error {
	if d.reaper == nil {
		return nil
	}
	if removed {
		_ = d.reaper.RemoveDockerLabel(d.host, d.label)
	}
	err := d.reaper.Stop()
	d.reaper = nil
	return err
}

// tcLogger sends testcontainers' chatter (one line per container step) to
// the harness's logger at debug level instead of stderr.
type tcLogger struct{ log *slog.Logger }

func (l tcLogger) Printf(format string, v ...any) {
	l.log.Debug("testcontainers: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func firstLine(err error) error {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(s)
}

// containerPG is a PostgreSQL container on a fixed loopback port. A crash is
// `docker kill -s KILL` of the container (the postmaster is its PID 1, so
// the kernel kills it and every backend at once, as SIGKILL of a local
// postmaster does); a restart is `docker start` of the same container: same
// data (the container's own layer), same port, crash recovery replays the
// WAL, and with synchronous_commit=on every acknowledged commit is in it.
type containerPG struct {
	*dsnPG
	c       *tcpostgres.PostgresContainer
	d       *docker
	image   string
	port    int
	log     *slog.Logger
	started time.Duration // container create → first query answered
	closed  bool
}

const containerPGPassword = "postgres"

func startContainerPG(ctx context.Context, image, runID string, log *slog.Logger, settings map[string]string) (_ *containerPG, err error) {
	if image == "" {
		image = DefaultPostgresImage
	}
	// The manifest's settings (postgres_settings.go), after ours.
	sopts, err := containerSettings(settings)
	if err != nil {
		return nil, err
	}
	d, err := dockerUp(ctx, "postgres", runID, log)
	if err != nil {
		return nil, err
	}
	p := &containerPG{d: d, image: image, log: log}
	defer func() {
		if err != nil {
			_ = p.close()
		}
	}()
	if err := d.image(ctx, "postgres", image, "--postgres-image",
		"build one locally (scripts/pg-image.sh makes one from the host's PostgreSQL package)"); err != nil {
		return nil, err
	}
	// A fixed host port, chosen here: Docker gives a published port without
	// one a new number on every start, and the links forward to this one.
	if p.port, err = freePort(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	c, err := tcpostgres.Run(ctx, image, append([]testcontainers.ContainerCustomizer{testcontainers.WithLogger(tcLogger{log}),
		tcpostgres.WithDatabase("postgres"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword(containerPGPassword),
		// The settings the local provider runs with (postgres_local.go).
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=on",
			"-c", "max_connections=300", "-c", "shared_buffers=32MB"),
		testcontainers.WithLabels(d.labels),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{network.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(p.port)}}}
		}),
		// Ready when a query answers on the published port: the official
		// image's first "ready" log line is its init-time server, which
		// listens on no TCP port.
		testcontainers.WithWaitStrategy(&pgReady{p: p})}, sopts...)...,
	)
	p.c = c
	if err != nil {
		return nil, fmt.Errorf("postgres: testcontainers run %s: %w", image, err)
	}
	p.started = time.Since(t0)
	dsn := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", containerPGPassword, p.port)
	if p.dsnPG, err = openDSNPG(ctx, dsn, "the container"); err != nil {
		return nil, err
	}
	log.Info("postgres container up", "image", image, "id", c.GetContainerID()[:12], "port", p.port, "start", p.started)
	return p, nil
}

// pgReady is a wait strategy: a query answers through the fixed port.
type pgReady struct{ p *containerPG }

func (w *pgReady) WaitUntilReady(ctx context.Context, _ wait.StrategyTarget) error {
	return w.p.waitReady(ctx)
}

func (p *containerPG) waitReady(ctx context.Context) error {
	dsn := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", containerPGPassword, p.port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, dsn)
		if err == nil {
			_, err = conn.Exec(cctx, "SELECT 1")
			_ = conn.Close(context.Background())
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres container not answering on 127.0.0.1:%d after 60s: %w", p.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *containerPG) id() string {
	if p.c == nil {
		return ""
	}
	return p.c.GetContainerID()
}

func (p *containerPG) crash(ctx context.Context) error {
	if _, err := p.d.cli.ContainerKill(ctx, p.id(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("postgres container: kill: %w", err)
	}
	// Wait until the engine has seen it exit, so a restart starts it again.
	for i := 0; i < 500; i++ {
		st, err := p.d.cli.ContainerInspect(ctx, p.id(), client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("postgres container: inspect after kill: %w", err)
		}
		if st.Container.State == nil || !st.Container.State.Running {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("postgres container: still running 5s after SIGKILL")
}

func (p *containerPG) restart(ctx context.Context) error {
	st, err := p.d.cli.ContainerInspect(ctx, p.id(), client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("postgres container: inspect: %w", err)
	}
	if st.Container.State != nil && st.Container.State.Running {
		// Like the local provider: restart means kill, then start.
		if err := p.crash(ctx); err != nil {
			return err
		}
	}
	if _, err := p.d.cli.ContainerStart(ctx, p.id(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("postgres container: start after kill: %w", err)
	}
	return p.waitReady(ctx)
}

func (p *containerPG) describe() string {
	return fmt.Sprintf("testcontainers %s (container %.12s, %s, up in %s)", p.image, p.id(), p.dsnPG.describe(), p.started.Round(time.Millisecond))
}

func (p *containerPG) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.dsnPG != nil {
		// The container goes with every database in it: no need to drop
		// them one by one first.
		p.dsnPG.created = nil
	}
	removed := true
	if p.c != nil {
		if err := p.c.Terminate(context.Background(), testcontainers.RemoveVolumes()); err != nil {
			removed = false
			errs = append(errs, fmt.Errorf("postgres: terminate container: %w", err))
		}
	}
	if err := p.d.close(removed); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// containerKafka is a Redpanda container speaking the Kafka protocol. No
// Kafka or Redpanda image can be had without a registry: then Up fails with
// one line naming the image and --kafka-image (exit code 2).
type containerKafka struct {
	*externalKafka
	c *redpanda.Container
	d *docker
}

func startContainerKafka(ctx context.Context, image, runID string, topics []Topic, prefix string, log *slog.Logger) (_ *containerKafka, err error) {
	if image == "" {
		image = DefaultKafkaImage
	}
	d, err := dockerUp(ctx, "kafka", runID, log)
	if err != nil {
		return nil, err
	}
	k := &containerKafka{d: d}
	defer func() {
		if err != nil {
			_ = k.close()
		}
	}()
	if err := d.image(ctx, "kafka", image, "--kafka-image", "load a Redpanda or Kafka image (docker load)"); err != nil {
		return nil, err
	}
	c, err := redpanda.Run(ctx, image, testcontainers.WithLogger(tcLogger{log}), testcontainers.WithLabels(d.labels))
	k.c = c
	if err != nil {
		return nil, fmt.Errorf("kafka: testcontainers redpanda: %w", err)
	}
	addr, err := c.KafkaSeedBroker(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: redpanda seed broker: %w", err)
	}
	if k.externalKafka, err = openExternalKafka(ctx, "testcontainers", []string{addr}, "the container", topics, prefix); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *containerKafka) close() error {
	var errs []error
	if k.externalKafka != nil {
		if err := k.externalKafka.close(); err != nil {
			errs = append(errs, err)
		}
	}
	removed := true
	if k.c != nil {
		if err := k.c.Terminate(context.Background(), testcontainers.RemoveVolumes()); err != nil {
			removed = false
			errs = append(errs, fmt.Errorf("kafka: terminate container: %w", err))
		}
	}
	if k.d != nil {
		if err := k.d.close(removed); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
