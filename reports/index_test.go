package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// sweep builds n runs of one campaign: every 7th seed loses an event,
// every 50th is unknown, every 333rd could not run.
func sweep(n int) []RunSummary {
	var runs []RunSummary
	for seed := 1; seed <= n; seed++ {
		v := models.Verdict{Version: 1, Status: models.Valid, Ops: 900, Run: models.RunInfo{Target: "reference", Mutant: "mark-before-ack", Scenario: "relay-publish-crash", Seed: uint64(seed)},
			Results: []models.CheckResult{{Checker: "no-lost-event", Status: models.Valid}}}
		switch {
		case seed%333 == 0:
			v = models.Verdict{Error: "env up: initdb failed", Run: v.Run}
		case seed%7 == 0:
			v.Status = models.Invalid
			v.Results[0] = models.CheckResult{Checker: "no-lost-event", Status: models.Invalid, Violations: []models.Violation{
				{Checker: "no-lost-event", Kind: "lost-event", Order: "o-1", Message: "row marked published but not in the log", Ops: []int64{1, 2}},
				{Checker: "no-lost-event", Kind: "lost-event", Order: "o-2", Message: "again", Ops: []int64{1, 3}}}}
		case seed%50 == 0:
			v.Status = models.Unknown
			v.Results[0] = models.CheckResult{Checker: "no-lost-event", Status: models.Unknown, Unknown: "no outbox snapshot"}
		}
		runs = append(runs, RunSummary{Dir: fmt.Sprintf("runs/s%d", seed), Verdict: v, Summarized: v.Status == models.Valid && v.Error == ""})
	}
	return runs
}

func TestSeedRanges(t *testing.T) {
	for _, tt := range []struct {
		in   []uint64
		want string
	}{
		{nil, ""}, {[]uint64{5}, "5"}, {[]uint64{3, 1, 2, 7, 9, 10, 11, 11}, "1–3, 7, 9–11"},
	} {
		if got := seedRanges(tt.in); got != tt.want {
			t.Errorf("seedRanges(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestWriteIndexSweepOf1000 keeps the merged index of a 1,000-run sweep
// one screen of summary: one strip with a cell per run, the signature's
// seeds as ranges and at most 40 linked runs before a closed list, the
// 857 valid runs folded away and shown without links (not kept).
func TestWriteIndexSweepOf1000(t *testing.T) {
	runs := sweep(1000)
	var buf bytes.Buffer
	if err := WriteIndex(&buf, runs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if got := strings.Count(page, `<rect class="cell st-`); got != 1000+142 {
		t.Errorf("%d strip cells, want 1000 on the sweep's strip and 142 on the signature's", got)
	}
	for _, st := range []string{"invalid", "valid", "unknown", "error"} {
		if !strings.Contains(page, `class="cell st-`+st+`"`) {
			t.Errorf("no %s cell on the strip", st)
		}
	}
	if !strings.Contains(page, "seeds 7, 14, 21, 28") || !strings.Contains(page, "1000 runs (142 invalid, 18 unknown, 3 error, 837 valid), seeds 1–1000") {
		t.Error("sweep strip caption or the signature's seed list is missing")
	}
	sig := page[strings.Index(page, `id="signatures"`):strings.Index(page, `id="runs"`)]
	if got := strings.Count(sig, `<a class="mono"`); got != 142 {
		t.Errorf("signature links %d runs, want all 142 (40 shown, the rest in a closed list)", got)
	}
	if !strings.Contains(sig, "<summary>102 more runs</summary>") {
		t.Error("the runs beyond the first 40 are not folded into a closed list")
	}
	if !strings.Contains(page, `<summary>837 valid runs</summary>`) || !strings.Contains(page, "837 runs summarised (directory not kept)") {
		t.Error("valid runs are not folded away or not said to be summarised")
	}
	if strings.Contains(page, `href="runs/s1/report.html"`) {
		t.Error("a summarised run is linked")
	}
	if !strings.Contains(page, `href="runs/s7/report.html"`) {
		t.Error("a kept failing run is not linked")
	}
	if len(page) > 1<<20 {
		t.Errorf("index of 1000 runs is %d bytes, want under 1 MiB", len(page))
	}
	// Tick labels on the strip never touch.
	ticks := regexp.MustCompile(`<text class="tick" x="([0-9.]+)" y="31">([^<]+)</text>`).FindAllStringSubmatch(page, -1)
	if len(ticks) < 3 {
		t.Fatalf("%d seed ticks on the strip", len(ticks))
	}
	end := -100.0
	for _, tk := range ticks {
		var x float64
		fmt.Sscan(tk[1], &x)
		if x < end+4 {
			t.Errorf("tick %s at %.1f overlaps the one before (ends %.1f)", tk[2], x, end)
		}
		end = x + textWidth(tk[2], 10)
	}
}

func TestReadSummaryFileAndMerge(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for _, r := range sweep(10) {
		rec := models.RunRecord{Dir: filepath.Base(r.Dir), Kept: !r.Summarized, DurationMS: 1500, Verdict: r.Verdict}
		b, _ := json.Marshal(rec)
		lines = append(lines, string(b))
	}
	// A kept run whose directory exists; one said kept that is gone.
	kept := filepath.Join(dir, "s7")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kept, VerdictFile), []byte(`{"version":1,"status":"invalid"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, models.SummaryFile)
	body := strings.Join(lines, "\n") + "\n" + `{"dir":"cut-of` // a sweep killed mid-line
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := ReadSummaryFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 10 || sum[0].Dir != filepath.Join(dir, "s1") || !sum[0].Summarized || sum[0].Elapsed != 1500*time.Millisecond {
		t.Fatalf("read %d runs, first %+v", len(sum), sum[0])
	}
	fromDirs := []RunSummary{{Dir: kept, Verdict: models.Verdict{Status: models.Invalid, Run: models.RunInfo{Seed: 7}}}}
	all := MergeRuns(fromDirs, sum)
	if len(all) != 10 {
		t.Errorf("merged %d runs, want 10 (the kept one once)", len(all))
	}
	if all[0].Elapsed != 1500*time.Millisecond {
		t.Error("the kept run did not get its elapsed time from the summary")
	}
	for _, r := range all {
		if strings.HasSuffix(r.Dir, "s8") || strings.HasSuffix(r.Dir, "s9") {
			if !r.Summarized {
				t.Errorf("%s is valid and not kept, but not marked summarised", r.Dir)
			}
		}
	}
	// A bad line before the last is an error that names it.
	if err := os.WriteFile(file, []byte("{bad\n"+lines[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummaryFile(file); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad first line: err %v, want one naming line 1", err)
	}
}
