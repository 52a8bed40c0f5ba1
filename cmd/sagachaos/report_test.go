package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
)

// copyRun copies a saved run (history.jsonl, verdict.json) into a fresh dir.
func copyRun(t *testing.T, from string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"history.jsonl", "verdict.json"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var reportBadge = regexp.MustCompile(`id="verdict">([A-Z]+)`)

func reportStatus(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	m := reportBadge.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s/report.html shows no verdict badge", dir)
	}
	return string(m[1])
}

// `report` never renders a verdict.json that does not judge the history
// beside it: a history cut in half next to its old VALID verdict is
// re-checked, rendered and stored as what `check` says (issue 10 item 2).
func TestReportRechecksAStaleVerdict(t *testing.T) {
	const saved = "../../checkers/testdata/runs/real-reference-calm-seed2"
	orig, err := reports.ReadVerdict(filepath.Join(saved, "verdict.json"))
	if err != nil || orig.Status != models.Valid {
		t.Fatalf("the saved run's verdict: %v %v, want valid", orig.Status, err)
	}
	cut := func(t *testing.T) string {
		dir := copyRun(t, saved)
		b, _ := os.ReadFile(filepath.Join(dir, "history.jsonl"))
		lines := bytes.SplitAfter(b, []byte("\n"))
		if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), bytes.Join(lines[:len(lines)/2], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	// What check says of the cut history.
	ref := cut(t)
	r := sagachaos(t, "check", ref)
	want, err := reports.ReadVerdict(filepath.Join(ref, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want.Status == models.Valid || r.code == 0 {
		t.Fatalf("check calls half a history %s (exit %d): the test needs a history check does not call valid", want.Status, r.code)
	}

	dir := cut(t)
	r = sagachaos(t, "report", dir)
	if r.code != 0 {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := reportStatus(t, dir); got != strings.ToUpper(string(want.Status)) {
		t.Errorf("report.html says %s, check says %s", got, want.Status)
	}
	got, err := reports.ReadVerdict(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != want.Status || got.Ops != want.Ops || got.HistoryDigest != want.HistoryDigest || got.HistoryDigest == "" {
		t.Errorf("verdict.json after report: %s, %d ops, digest %q; check wrote %s, %d ops, digest %q",
			got.Status, got.Ops, got.HistoryDigest, want.Status, want.Ops, want.HistoryDigest)
	}
	if got.Run != orig.Run {
		t.Errorf("the run's identity was lost: %+v, want %+v", got.Run, orig.Run)
	}
	out := r.stdout + r.stderr
	for _, w := range []string{"verdict.json did not match history.jsonl", "re-checked", "valid → " + string(want.Status)} {
		if !strings.Contains(out, w) {
			t.Errorf("report does not say %q:\n%s", w, out)
		}
	}

	// A second report finds the verdict current: nothing to say.
	r = sagachaos(t, "report", dir)
	if strings.Contains(r.stdout+r.stderr, "did not match") {
		t.Errorf("report calls its own verdict stale:\n%s%s", r.stdout, r.stderr)
	}

	// An edit that keeps the op count is caught by the digest.
	same := copyRun(t, saved)
	if r := sagachaos(t, "check", same); r.code != 0 {
		t.Fatalf("check of the saved run: exit %d\n%s", r.code, r.stdout)
	}
	b, _ := os.ReadFile(filepath.Join(same, "history.jsonl"))
	b = bytes.Replace(b, []byte(`"status":"APPROVED"`), []byte(`"status":"CANCELLED"`), 1)
	os.WriteFile(filepath.Join(same, "history.jsonl"), b, 0o644)
	r = sagachaos(t, "report", same)
	if !strings.Contains(r.stdout+r.stderr, "history digest") {
		t.Errorf("report does not notice a history edited in place:\n%s%s", r.stdout, r.stderr)
	}
	if v, _ := reports.ReadVerdict(filepath.Join(same, "verdict.json")); v.Status == models.Valid {
		t.Errorf("an order turned from APPROVED to CANCELLED in place still renders valid")
	}
}
