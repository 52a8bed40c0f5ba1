package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/harness/runstore"
)

// replay executes a printed replay line with the test's binary, writing
// its run directory under out, and returns that directory.
func replay(t *testing.T, line, out string) string {
	t.Helper()
	words := strings.Fields(line)
	if len(words) < 3 || words[0] != "sagachaos" {
		t.Fatalf("replay line %q does not start with sagachaos <command>", line)
	}
	args := append([]string{words[1], "--out", out}, words[2:]...)
	r := sagachaos(t, args...)
	if r.code == 2 {
		t.Fatalf("the replay line %q does not run (exit 2):\n%s", line, r.stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(dirs) != 1 {
		t.Fatalf("replay %q made run dirs %v", line, dirs)
	}
	return dirs[0]
}

func sameScenario(t *testing.T, line, orig, again string) {
	t.Helper()
	a, err := os.ReadFile(filepath.Join(orig, runstore.ScenarioFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(again, runstore.ScenarioFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%q ran another scenario than %s:\n%s\n---\n%s", line, orig, a, b)
	}
}

func linesAfter(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, prefix); i >= 0 {
			out = append(out, strings.TrimSpace(l[i+len(prefix):]))
		}
	}
	return out
}

// TestEveryReplayLineReplays: each replay line the tool prints — the
// verdict's repro line (with the --time-limit it ran with), the "replay the
// exact scenario.json" line, repro's own, and the lines selftest writes
// for mutant and reference runs — runs, and runs the same scenario.json.
func TestEveryReplayLineReplays(t *testing.T) {
	out := t.TempDir()
	r := sagachaos(t, "run", "--mutant", "email-before-pivot", "--scenario", "testdata/small-calm.json", "--seed", "1", "--time-limit", "45s", "--out", filepath.Join(out, "orig"))
	if r.code != 1 {
		t.Fatalf("run: exit %d, want 1 (a planted bug)\n%s%s", r.code, r.stdout, r.stderr)
	}
	orig, _ := filepath.Glob(filepath.Join(out, "orig", "*"))
	repro, exact := linesAfter(r.stdout, "repro:"), linesAfter(r.stdout, "replay the exact scenario.json:")
	if len(orig) != 1 || len(repro) != 1 || len(exact) != 1 {
		t.Fatalf("run dirs %v, repro lines %q, exact lines %q\n%s", orig, repro, exact, r.stdout)
	}
	if !strings.Contains(repro[0], "--time-limit 45s") {
		t.Errorf("the repro line %q drops --time-limit", repro[0])
	}
	for i, line := range []string{repro[0], exact[0]} {
		again := replay(t, line, filepath.Join(out, "replay", string(rune('a'+i))))
		sameScenario(t, line, orig[0], again)
		if i == 1 {
			// The replay of a replay: repro's verdict carries its own line.
			r := sagachaos(t, "check", again)
			lines := linesAfter(r.stdout, "repro:")
			if len(lines) != 1 {
				t.Fatalf("check of the repro run printed repro lines %q", lines)
			}
			sameScenario(t, lines[0], orig[0], replay(t, lines[0], filepath.Join(out, "replay", "c")))
		}
	}

	st := filepath.Join(out, "selftest")
	r = sagachaos(t, "selftest", "-q", "--mutants", "email-before-pivot", "--mutant-seeds", "1", "--reference", "calm", "--reference-seeds", "1", "--out", st)
	if r.code == 2 {
		t.Fatalf("selftest: exit 2\n%s", r.stderr)
	}
	// The run directories (the gate's table, gate.tsv, sits beside them).
	var dirs []string
	all, _ := filepath.Glob(filepath.Join(st, "*"))
	for _, d := range all {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) != 2 {
		t.Fatalf("selftest run dirs %v, want a mutant run and a reference run", dirs)
	}
	for i, d := range dirs {
		r := sagachaos(t, "check", d)
		lines := linesAfter(r.stdout, "repro:")
		if len(lines) != 1 {
			// A valid run prints no repro line; read it from the verdict.
			b, _ := os.ReadFile(filepath.Join(d, runstore.VerdictFile))
			lines = linesAfter(string(b), `"repro": "`)
			if len(lines) == 1 {
				lines[0] = strings.TrimSuffix(strings.TrimSuffix(lines[0], ","), `"`)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("%s: no repro line", d)
		}
		if strings.Contains(lines[0], "--mutant  ") || strings.HasSuffix(lines[0], "--mutant") {
			t.Errorf("%s: repro line %q has an empty --mutant", d, lines[0])
		}
		sameScenario(t, lines[0], d, replay(t, lines[0], filepath.Join(out, "selftest-replay", string(rune('a'+i)))))
	}
}
