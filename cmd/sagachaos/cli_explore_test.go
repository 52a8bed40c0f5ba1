package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExploreFindsAndReplays: a short campaign against a planted bug stops
// at the first violation with exit 1, prints its run directory and two
// replay lines that both run its scenario.json, writes explore.html and a
// journal line per candidate; repro --until reruns it until the violation
// recurs and says how faithfully.
func TestExploreFindsAndReplays(t *testing.T) {
	out := t.TempDir()
	r := sagachaos(t, "explore", "--mutant", "email-before-pivot", "--scenario", "testdata/small-calm.json", "--runs", "4", "--budget", "20m", "--seed", "2", "--out", filepath.Join(out, "c"))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	camps, _ := filepath.Glob(filepath.Join(out, "c", "*"))
	if len(camps) != 1 {
		t.Fatalf("campaign dirs %v", camps)
	}
	for _, f := range []string{"explore.html", "candidates.jsonl", "campaign.json"} {
		if _, err := os.Stat(filepath.Join(camps[0], f)); err != nil {
			t.Errorf("campaign directory lacks %s", f)
		}
	}
	b, _ := os.ReadFile(filepath.Join(camps[0], "candidates.jsonl"))
	runs := strings.Count(string(b), "\n")
	if runs < 1 || !strings.Contains(r.stdout, "first violation: ") {
		t.Fatalf("%d journal lines\n%s", runs, r.stdout)
	}
	exact, again := linesAfter(r.stdout, "replay the exact scenario.json:"), linesAfter(r.stdout, "run it again:")
	if len(exact) != 1 || len(again) != 1 {
		t.Fatalf("replay lines %q %q\n%s", exact, again, r.stdout)
	}
	dir := strings.TrimPrefix(exact[0], "sagachaos repro ")
	for i, line := range []string{exact[0], again[0]} {
		sameScenario(t, line, dir, replay(t, line, filepath.Join(out, "replay", string(rune('a'+i)))))
	}
	r = sagachaos(t, "repro", dir, "--until", "3", "--out", filepath.Join(out, "until"))
	if r.code != 1 || !strings.Contains(r.stdout, "recurred in 1 of 1 replays") || !strings.Contains(r.stdout, "replay fidelity:") {
		t.Fatalf("repro --until: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestExploreReferenceCorpusReplays: a campaign on the correct target ends
// with exit 0 when its runs are spent, and each corpus entry runs with
// `run --scenario FILE` as exactly that scenario.
func TestExploreReferenceCorpusReplays(t *testing.T) {
	runs := 3
	if testing.Short() {
		runs = 2 // the first run always reaches something new, the second may mutate it
	}
	out := t.TempDir()
	r := sagachaos(t, "explore", "--scenario", "testdata/small-relay-crash.json", "--runs", fmt.Sprint(runs), "--budget", "20m", "--seed", "5", "--out", filepath.Join(out, "c"), "--corpus", filepath.Join(out, "corpus"))
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("explore: %d runs", runs)) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	entries, _ := filepath.Glob(filepath.Join(out, "corpus", "*.json"))
	if len(entries) == 0 {
		t.Fatal("no corpus entry: the first run always reaches something new")
	}
	run := filepath.Join(out, "run")
	r = sagachaos(t, "run", "--scenario", entries[0], "--out", run)
	if r.code != 0 {
		t.Fatalf("run --scenario %s: exit %d\n%s%s", entries[0], r.code, r.stdout, r.stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(run, "*"))
	if len(dirs) != 1 {
		t.Fatalf("run dirs %v", dirs)
	}
	a, _ := os.ReadFile(entries[0])
	b, _ := os.ReadFile(filepath.Join(dirs[0], "scenario.json"))
	if string(a) != string(b) {
		t.Errorf("run --scenario %s ran another scenario:\n%s\n---\n%s", entries[0], a, b)
	}
	// A second campaign on that corpus runs its entries first.
	r = sagachaos(t, "explore", "--scenario", "testdata/small-relay-crash.json", "--runs", "1", "--budget", "20m", "--seed", "6", "--out", filepath.Join(out, "c2"), "--corpus", filepath.Join(out, "corpus"))
	if r.code != 0 || !strings.Contains(r.stderr, "entries run first") || !strings.Contains(r.stderr, "corpus "+entries[0]) {
		t.Errorf("second campaign: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
