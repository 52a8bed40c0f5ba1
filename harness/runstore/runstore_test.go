package runstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

func TestCreateWritesScenarioAndHistory(t *testing.T) {
	sc := Scenario{Target: "reference", Mutant: "dual-write", Scenario: scenarios.Scenario{Name: "calm", Seed: 3}}
	d, err := Create(filepath.Join(t.TempDir(), "run"), sc)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(d.Path) {
		t.Errorf("run dir %q is not absolute", d.Path)
	}
	rec, err := models.NewRecorder(d.History(), models.Header{Run: "r"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(models.ProcHarness, models.Info, models.FRunStart, "", nil)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	back, err := ReadScenario(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Mutant != "dual-write" || back.Scenario.Name != "calm" || back.Scenario.Seed != 3 {
		t.Errorf("scenario.json read back as %+v", back)
	}
	h, err := models.ReadHistoryFile(d.File(HistoryFile))
	if err != nil || len(h.Ops) != 1 {
		t.Fatalf("history: %v, %v", h, err)
	}
}

// TestWriteArtifactsIsAtomic: every artifact replaces the old one by a
// rename, and nothing but the artifacts is left in the directory.
func TestWriteArtifactsIsAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{VerdictFile, ReportFile, JUnitFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("stale"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "relay-1.log"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &models.History{Ops: []models.Op{{I: 0, Proc: models.ProcHarness, Type: models.Info, F: models.FRunStart}}}
	v := models.Verdict{Version: models.VerdictVersion, Status: models.Invalid, Run: models.RunInfo{Scenario: "calm", Seed: 42, Repro: "sagachaos run --scenario calm --seed 42"}, Ops: 1}
	before, _ := os.Stat(filepath.Join(dir, ReportFile))
	if err := WriteArtifacts(dir, h, v); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, ReportFile))
	if os.SameFile(before, after) {
		t.Error("report.html was rewritten in place, not replaced by a rename")
	}
	var back models.Verdict
	b, _ := os.ReadFile(filepath.Join(dir, VerdictFile))
	if err := json.Unmarshal(b, &back); err != nil || back.Run.Seed != 42 {
		t.Errorf("verdict.json = %s (%v)", b, err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	if !strings.Contains(string(page), `href="./relay-1.log"`) {
		t.Error("report.html does not link the run directory's log")
	}
	junit, _ := os.ReadFile(filepath.Join(dir, JUnitFile))
	if !strings.Contains(string(junit), "<testsuite") {
		t.Errorf("junit.xml = %.80s", junit)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestReplayLine(t *testing.T) {
	cases := []struct {
		r    Replay
		want string
	}{
		{Replay{Target: "reference", Scenario: "calm", Seed: 1}, "sagachaos run --target reference --scenario calm --seed 1"},
		{Replay{Target: "reference", Mutant: "dual-write", Scenario: "calm", Seed: 2}, "sagachaos run --target reference --mutant dual-write --scenario calm --seed 2"},
		{Replay{Target: "reference", Scenario: "calm", Seed: 3, TimeLimit: 90e9}, "sagachaos run --target reference --scenario calm --seed 3 --time-limit 1m30s"},
		{Replay{Target: "t.json", Scenario: "my scenario.json", Seed: 4, Flags: []string{"--postgres", "dsn"}}, "sagachaos run --target t.json --scenario 'my scenario.json' --seed 4 --postgres dsn"},
		{Replay{RunDir: "runs/x-calm-1", Mutant: "ignored"}, "sagachaos repro runs/x-calm-1"},
		{Replay{Target: "reference", Mutant: "dual-write", Scenario: "explore/c/runs/c0007/scenario.json", Exact: true, Seed: 9}, "sagachaos run --target reference --mutant dual-write --scenario explore/c/runs/c0007/scenario.json"},
		{Replay{RunDir: "it's"}, `sagachaos repro 'it'\''s'`},
	}
	for _, c := range cases {
		if got := c.r.Line(); got != c.want {
			t.Errorf("%+v.Line() = %q, want %q", c.r, got, c.want)
		}
	}
}
