package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startRunInWorkload starts `sagachaos run` and returns once its workload
// is running with the target up.
func startRunInWorkload(t *testing.T, out string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	cmd := exec.Command(cliBin, "run", "--scenario", "everything", "--seed", "2", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		dirs, _ := filepath.Glob(filepath.Join(out, "*"))
		if len(dirs) == 1 {
			if b, _ := os.ReadFile(filepath.Join(dirs[0], "history.jsonl")); bytes.Contains(b, []byte(`"name":"workload"`)) && len(leftovers(t, dirs[0])) > 0 {
				return cmd, &stderr, dirs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never reached its workload\n%s", stderr.String())
		}
	}
}

// TestSecondInterruptEndsAtOnce: a second Ctrl-C ends the harness at once
// (exit 130) and still leaves no process and no database behind.
func TestSecondInterruptEndsAtOnce(t *testing.T) {
	cmd, stderr, runDir := startRunInWorkload(t, t.TempDir())
	cmd.Process.Signal(os.Interrupt)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	t.Logf("exited %v after the second Ctrl-C", time.Since(start).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, stderr.String())
	}
	assertNothingLeft(t, runDir)
}
