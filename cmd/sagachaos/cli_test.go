package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

var cliBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sagachaos-cli-test-")
	if err != nil {
		panic(err)
	}
	cliBin = filepath.Join(dir, "sagachaos")
	if out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sagachaos: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func sagachaos(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(cliBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sagachaos %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// errorLines are the lines the CLI prints as its own error ("sagachaos: …").
func errorLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "sagachaos:") {
			out = append(out, l)
		}
	}
	return out
}

// leftovers lists processes a run left behind: target components carry the
// run directory in their environment, and the embedded PostgreSQL's data
// directory is named after the harness's pid.
func leftovers(t *testing.T, runDir string) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	marker := []byte("SAGACHAOS_FAILPOINT_LOG=" + runDir)
	for _, p := range procs {
		env, err := os.ReadFile(p + "/environ")
		if err != nil {
			continue
		}
		if bytes.Contains(env, marker) {
			cmd, _ := os.ReadFile(p + "/cmdline")
			out = append(out, filepath.Base(p)+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

func assertNothingLeft(t *testing.T, runDir string) {
	t.Helper()
	abs, _ := filepath.Abs(runDir)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := append(leftovers(t, runDir), leftovers(t, abs)...)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind by the run:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A throwaway data directory whose harness (its pid is in the name) is
	// dead must be gone.
	// (They live under /dev/shm when it is a tmpfs, else the temp dir.)
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "sagachaos-pg-*"))
	shm, _ := filepath.Glob("/dev/shm/sagachaos-pg-*")
	matches = append(matches, shm...)
	for _, m := range matches {
		pid := 0
		fmt.Sscanf(filepath.Base(m), "sagachaos-pg-%d-", &pid)
		if pid > 0 && syscall.Kill(pid, 0) != nil {
			t.Errorf("data directory %s of a dead harness (pid %d) was left behind", m, pid)
		}
	}
}

func TestBadInputsExitTwoWithOneLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"malformed scenario", []string{"run", "--scenario", "testdata/broken.json"}, "scenario testdata/broken.json: field sagas: max 5 is below min 10"},
		{"broken domain", []string{"run", "--target", "testdata/bad-domain.json", "--scenario", "calm"}, `field saga.steps[0].effect.provider: "airline" is not a provider of world`},
		{"unknown scenario param", []string{"run", "--scenario", "testdata/unknown-param.json"}, `field params.seats: the target declares no range "seats"`},
		{"unknown scenario", []string{"run", "--scenario", "no-such"}, `unknown scenario "no-such"`},
		{"unknown failpoint", []string{"run", "--scenario", "testdata/unknown-failpoint.json"}, `unknown failpoint "relay.after-lunch"`},
		{"unknown mutant", []string{"run", "--scenario", "calm", "--mutant", "no-such-bug"}, `unknown mutant "no-such-bug"`},
		{"unknown target", []string{"run", "--target", "no-such-target"}, `unknown target "no-such-target"`},
		{"bad seeds", []string{"run", "--seeds", "9-1"}, "backwards"},
		{"unreachable dsn", []string{"run", "--scenario", "calm", "--postgres", "dsn", "--postgres-dsn", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2"}, "postgres"},
		{"docker absent", []string{"run", "--scenario", "calm", "--postgres", "testcontainers"}, "ocker"},
		{"target crashes on start", []string{"run", "--target", "testdata/crash-on-start.json", "--scenario", "calm"}, "orders"},
		{"target never healthy", []string{"run", "--target", "testdata/never-healthy.json", "--scenario", "calm", "--health-timeout", "2s"}, "never became healthy"},
		{"check without run dir", []string{"check", "/nonexistent-run"}, "nonexistent-run"},
		{"concrete scenario with a seed", []string{"run", "--scenario", "testdata/concrete-bad-target.json", "--seed", "4"}, "runs as written"},
		{"concrete scenario aimed at nothing", []string{"run", "--scenario", "testdata/concrete-bad-target.json"}, "relay-9"},
		{"explore from a concrete scenario", []string{"explore", "--scenario", "testdata/concrete-bad-target.json", "--runs", "1"}, "spec of ranges"},
		{"explore without bounds", []string{"explore", "--budget", "0"}, "--budget or --runs"},
		{"repro --until and --times", []string{"repro", "--until", "2", "--times", "2", "/nonexistent-run"}, "not both"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(append([]string(nil), c.args...), "--out", out)
			if c.args[0] != "run" {
				args = c.args
			}
			r := sagachaos(t, args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			lines := errorLines(r.stderr)
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("want exactly one error line containing %q, got %q\nstderr: %s", c.want, lines, r.stderr)
			}
			if strings.Contains(r.stdout, "INVALID") || strings.Contains(r.stdout, "VALID") {
				t.Fatalf("bad input produced a verdict: %s", r.stdout)
			}
			dirs, _ := filepath.Glob(filepath.Join(out, "*"))
			for _, d := range dirs {
				assertNothingLeft(t, d)
				var v models.Verdict
				if b, err := os.ReadFile(filepath.Join(d, "verdict.json")); err == nil {
					if err := json.Unmarshal(b, &v); err != nil || v.Error == "" {
						t.Errorf("%s/verdict.json does not record the error: %s", d, b)
					}
				}
			}
		})
	}
}

func TestRunReproCheckReport(t *testing.T) {
	out := t.TempDir()
	r := sagachaos(t, "run", "--scenario", "testdata/small-relay-crash.json", "--seed", "3", "--out", out)
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	runs, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(runs) != 1 {
		t.Fatalf("want one run dir, got %v", runs)
	}
	orig := runs[0]
	assertNothingLeft(t, orig)
	for _, f := range []string{"history.jsonl", "scenario.json", "verdict.json", "report.html", "junit.xml", "orders.log", "relay-1.log"} {
		if _, err := os.Stat(filepath.Join(orig, f)); err != nil {
			t.Errorf("run dir lacks %s", f)
		}
	}

	r = sagachaos(t, "repro", orig)
	if r.code != 0 {
		t.Fatalf("repro: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var matched, total int
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "replay fidelity:") {
			fmt.Sscanf(l, "replay fidelity: %d/%d", &matched, &total)
		}
	}
	if total == 0 || matched != total {
		t.Fatalf("repro fidelity %d/%d, want every fault to take the same effect\n%s", matched, total, r.stdout)
	}
	runs, _ = filepath.Glob(filepath.Join(out, "*-repro"))
	if len(runs) != 1 {
		t.Fatalf("want one repro run dir, got %v", runs)
	}
	a, _ := os.ReadFile(filepath.Join(orig, "scenario.json"))
	b, _ := os.ReadFile(filepath.Join(runs[0], "scenario.json"))
	if !bytes.Equal(a, b) {
		t.Fatalf("the replay ran another scenario:\n%s\n---\n%s", a, b)
	}

	r = sagachaos(t, "check", orig)
	if r.code != 0 || !strings.Contains(r.stdout, "VALID") {
		t.Fatalf("check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = sagachaos(t, "report", out)
	if r.code != 0 {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil {
		t.Fatalf("report of two runs wrote no index.html: %v", err)
	}
}

func TestInterruptLeavesNothingBehind(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(cliBin, "run", "--scenario", "everything", "--seed", "2", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the workload is running, with the target up.
	deadline := time.Now().Add(2 * time.Minute)
	var runDir string
	for {
		dirs, _ := filepath.Glob(filepath.Join(out, "*"))
		if len(dirs) == 1 {
			runDir = dirs[0]
			if b, _ := os.ReadFile(filepath.Join(runDir, "history.jsonl")); bytes.Contains(b, []byte(`"name":"workload"`)) {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the run never reached its workload\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(leftovers(t, runDir)) == 0 {
		t.Fatal("no target process found while the run is in its workload: the leftover check would prove nothing")
	}
	cmd.Process.Signal(os.Interrupt)
	interrupted := time.Now()
	err := cmd.Wait()
	t.Logf("exited %v after Ctrl-C", time.Since(interrupted).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	assertNothingLeft(t, runDir)
	var v models.Verdict
	b, _ := os.ReadFile(filepath.Join(runDir, "verdict.json"))
	if err := json.Unmarshal(b, &v); err != nil || !v.Interrupted {
		t.Fatalf("verdict.json does not say interrupted: %s", b)
	}
	h, err := models.ReadHistoryFile(filepath.Join(runDir, "history.jsonl"))
	if err != nil {
		t.Fatalf("partial history unreadable: %v", err)
	}
	found := false
	for _, op := range h.Ops {
		found = found || op.F == models.FInterrupted
	}
	if !found {
		t.Fatal("history has no interrupted op")
	}
}

// TestShrinkMinimises: a planted bug found on a multi-order case shrinks to
// a smaller case that still fails, and the CLI says how reliably it fails.
// The shrink is bounded by candidates, not by wall time: delta debugging
// halves the orders with its first candidates, so six candidates reduce
// the case on a loaded machine as on an idle one (the wall-time budget is
// only a backstop).
func TestShrinkMinimises(t *testing.T) {
	out := t.TempDir()
	var seed, orders int
	// Find a seed whose case has several orders and fails.
	for s := 1; s <= 10 && seed == 0; s++ {
		r := sagachaos(t, "run", "--mutant", "email-before-pivot", "--scenario", "testdata/small-calm.json", "--seed", fmt.Sprint(s), "--out", filepath.Join(out, "find"))
		if r.code == 1 {
			for _, l := range strings.Split(r.stderr, "\n") {
				var n int
				if _, err := fmt.Sscanf(l, "run small-calm seed %d: %d sagas", new(int), &n); err == nil && n > 1 {
					seed, orders = s, n
				}
			}
		}
	}
	if seed == 0 {
		t.Fatal("no seed in 1-10 gave a failing multi-order case to shrink")
	}
	r := sagachaos(t, "run", "--mutant", "email-before-pivot", "--scenario", "testdata/small-calm.json", "--seed", fmt.Sprint(seed),
		"--shrink", "--shrink-tries", "1", "--shrink-candidates", "6", "--shrink-confirm", "2", "--shrink-budget", "30m", "--out", filepath.Join(out, "shrink"))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	var minimal, candidates, runs, fails int
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "minimal case:") {
			fmt.Sscanf(l, "minimal case: %d sagas", &minimal)
			if i := strings.Index(l, "after "); i >= 0 {
				fmt.Sscanf(l[i:], "after %d candidates", &candidates)
			}
			if i := strings.Index(l, "it failed "); i >= 0 {
				fmt.Sscanf(l[i:], "it failed %d of %d", &fails, &runs)
			}
		}
	}
	if minimal == 0 || minimal >= orders {
		t.Fatalf("shrunk %d orders to %d, want fewer\n%s", orders, minimal, r.stdout)
	}
	if candidates == 0 || candidates > 6 {
		t.Errorf("%d candidates, bounded at 6\n%s", candidates, r.stdout)
	}
	if runs != 2 {
		t.Fatalf("%d confirmation runs reported, want 2\n%s", runs, r.stdout)
	}
	// The line that replays the minimal case runs exactly that case, and
	// that case still declines a card.
	lines := linesAfter(r.stdout, "replay it:")
	if len(lines) != 1 {
		t.Fatalf("replay lines %q\n%s", lines, r.stdout)
	}
	dir := strings.TrimPrefix(lines[0], "sagachaos repro ")
	sameScenario(t, lines[0], dir, replay(t, lines[0], filepath.Join(out, "replay")))
	// It fails the way the original did (shrinking keeps the signature).
	if c := sagachaos(t, "check", dir); c.code != 1 || !strings.Contains(r.stdout, "shows "+firstViolation(c.stdout)) {
		t.Errorf("the minimal case: check exit %d, violation %q not the one shrunk for\n%s", c.code, firstViolation(c.stdout), r.stdout)
	}
}

// firstViolation is "checker/kind" of the first FAIL line of a verdict
// printed by the terminal report ("  FAIL pivot … — order o-1 before-pivot: …").
func firstViolation(out string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "FAIL" {
			continue
		}
		if i := strings.Index(l, " — order "); i >= 0 {
			rest := strings.Fields(l[i+len(" — order "):])
			if len(rest) > 1 {
				return f[1] + "/" + strings.TrimSuffix(rest[1], ":")
			}
		}
		return f[1]
	}
	return ""
}
