//go:build docker

// The testcontainers provider on a real Docker engine. Built only with
// -tags docker: `make docker` starts a private engine (scripts/docker-up.sh),
// builds the local PostgreSQL image (scripts/pg-image.sh) and runs these;
// .ci/run does the same on a clean machine.

package env

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testImage is the PostgreSQL image under test: $SAGACHAOS_PG_IMAGE, else
// the one scripts/pg-image.sh builds.
func testImage() string {
	if s := os.Getenv("SAGACHAOS_PG_IMAGE"); s != "" {
		return s
	}
	return "sagachaos/postgres:15-local"
}

// needDocker fails (never skips) when no engine answers, saying how to get one.
func needDocker(t *testing.T) {
	t.Helper()
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		t.Fatalf("no Docker engine (DOCKER_HOST=%q): %v: %s\nstart one: make docker, or eval \"$(scripts/docker-up.sh)\" && scripts/pg-image.sh",
			os.Getenv("DOCKER_HOST"), err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("docker", "image", "inspect", testImage()).CombinedOutput(); err != nil {
		t.Fatalf("image %s not on the engine: %s\nbuild it: scripts/pg-image.sh", testImage(), strings.TrimSpace(string(out)))
	}
}

// dockerLines runs a docker CLI listing and returns its non-empty lines.
func dockerLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestContainerPostgres(t *testing.T) {
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	beforeNets := dockerLines(t, "network", "ls", "-q")

	t0 := time.Now()
	local, err := Up(ctx, Config{Databases: testDBs})
	if err != nil {
		t.Fatal(err)
	}
	localUp := time.Since(t0)
	local.Close()

	t0 = time.Now()
	e, err := Up(ctx, Config{Postgres: "testcontainers", PostgresImage: testImage(), Dir: t.TempDir(), Databases: testDBs,
		Topics: []Topic{{Name: "events", Partitions: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	containerUp := time.Since(t0)
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	p := e.pg.(*containerPG)
	// Measured, not asserted: printed for the CI log.
	fmt.Printf("postgres start (env.Up with %d databases): local %s, testcontainers %s (container create to first query %s, image %s)\n",
		len(testDBs), localUp.Round(time.Millisecond), containerUp.Round(time.Millisecond), p.started.Round(time.Millisecond), testImage())
	label := LabelRun + "=" + e.RunID()
	if ids := dockerLines(t, "ps", "-aq", "--filter", "label="+label); len(ids) != 1 {
		t.Fatalf("containers labelled %s: %v, want one", label, ids)
	}
	for _, db := range testDBs {
		if err := pingDSN(ctx, e.DirectDSN(db)); err != nil {
			t.Fatalf("database %s in the container: %v", db, err)
		}
	}

	t.Run("crash restart keeps every acknowledged commit", func(t *testing.T) {
		crashKeepsAcked(t, ctx, e)
	})

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if ids := dockerLines(t, "ps", "-aq", "--filter", "label="+label); len(ids) != 0 {
		t.Errorf("containers left after Close: %v", ids)
	}
	if after := dockerLines(t, "network", "ls", "-q"); strings.Join(after, " ") != strings.Join(beforeNets, " ") {
		t.Errorf("networks before %v, after %v", beforeNets, after)
	}
}

// TestContainerImageMissing: an image the engine lacks and cannot pull
// (no registry here) is one ErrUnavailable line naming the flag, for
// PostgreSQL and for Kafka (no Kafka or Redpanda image can be had here).
func TestContainerImageMissing(t *testing.T) {
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"postgres", Config{Postgres: "testcontainers", PostgresImage: "sagachaos/no-such-image:1"}, []string{"sagachaos/no-such-image:1", "--postgres-image", "scripts/pg-image.sh"}},
		{"kafka", Config{Kafka: "testcontainers"}, []string{DefaultKafkaImage, "--kafka-image", "embedded default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Up(ctx, tc.cfg)
			if err == nil {
				e.Close()
				t.Fatal("Up succeeded")
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("not ErrUnavailable (exit 2): %v", err)
			}
			msg := err.Error()
			t.Logf("%s", msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("not one line: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q", w)
				}
			}
		})
	}
	if ids := dockerLines(t, "ps", "-aq", "--filter", "label="+LabelRun); len(ids) != 0 {
		t.Errorf("containers left: %v", ids)
	}
}

const containerHelperEnv = "SAGACHAOS_CONTAINER_HELPER"

// TestContainerHelperProcess is not a test: re-executed by
// TestContainerHarnessDeath, it brings a testcontainers env up, prints its
// run id and waits for SIGINT (then closes the env, as the harness does on
// Ctrl-C) or for SIGKILL.
func TestContainerHelperProcess(t *testing.T) {
	if os.Getenv(containerHelperEnv) != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	e, err := Up(ctx, Config{Postgres: "testcontainers", PostgresImage: testImage(), Databases: []string{"orders"}})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("READY", e.RunID())
	<-ctx.Done()
	if err := e.Close(); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestContainerHarnessDeath: after SIGINT (Ctrl-C) and after SIGKILL of a
// process with a container up, nothing of it is left: no container, no
// network (the SIGKILL case is the reaper's work).
func TestContainerHarnessDeath(t *testing.T) {
	needDocker(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			beforeNets := dockerLines(t, "network", "ls", "-q")
			cmd := exec.Command(os.Args[0], "-test.run=^TestContainerHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), containerHelperEnv+"=1")
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			runID := ""
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
					runID = id
					break
				}
				if strings.HasPrefix(sc.Text(), "ERROR") {
					t.Fatalf("helper: %s", sc.Text())
				}
			}
			if runID == "" {
				t.Fatalf("helper printed no READY line (%v)", sc.Err())
			}
			label := "label=" + LabelRun + "=" + runID
			if ids := dockerLines(t, "ps", "-aq", "--filter", label); len(ids) != 1 {
				t.Fatalf("before the %s: containers %v, want one", sig, ids)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			werr := cmd.Wait()
			t.Logf("helper after %s: %v", sig, werr)
			eventually(t, "no container of run "+runID, func() error {
				if ids := dockerLines(t, "ps", "-aq", "--filter", label); len(ids) != 0 {
					return fmt.Errorf("containers %v", ids)
				}
				return nil
			})
			all := dockerLines(t, "ps", "-a", "--format", "{{.ID}} {{.Labels}}")
			for _, l := range all {
				if strings.Contains(l, runID) {
					t.Errorf("docker ps -a still shows the run: %s", l)
				}
			}
			if after := dockerLines(t, "network", "ls", "-q"); strings.Join(after, " ") != strings.Join(beforeNets, " ") {
				t.Errorf("networks before %v, after %v", beforeNets, after)
			}
			fmt.Printf("after %s of a harness with a container up: docker ps -a shows %d containers of run %s, docker network ls %d networks (%d before)\n",
				sig, len(dockerLines(t, "ps", "-aq", "--filter", label)), runID, len(dockerLines(t, "network", "ls", "-q")), len(beforeNets))
		})
	}
}
