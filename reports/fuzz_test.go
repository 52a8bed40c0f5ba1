package reports_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
)

// render writes every artifact of a verdict; none may panic or fail on a
// verdict this package accepted or the checkers produced.
func render(t *testing.T, h *models.History, v models.Verdict) {
	t.Helper()
	if err := reports.WriteJUnit(io.Discard, v); err != nil {
		t.Fatalf("WriteJUnit: %v", err)
	}
	if err := reports.WriteTerminal(io.Discard, v, "report.html", true); err != nil {
		t.Fatalf("WriteTerminal: %v", err)
	}
	if err := reports.WriteHTML(io.Discard, h, v, reports.HTMLOptions{}); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
}

// FuzzParseVerdict: verdict.json is read back by check, report and CI from
// run directories anyone may hand over. ParseVerdict never panics; a
// verdict it accepts renders, and writing it and parsing it again is the
// identity on the written form. Seeds: the saved verdicts, and the cases
// in testdata/fuzz/FuzzParseVerdict/.
func FuzzParseVerdict(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	more, _ := filepath.Glob("../checkers/testdata/runs/*/verdict.json")
	for _, p := range append(seeds, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := reports.ParseVerdict("fuzz.json", b)
		if err != nil {
			return
		}
		render(t, &models.History{}, v)
		var once, twice bytes.Buffer
		if err := reports.WriteJSON(&once, v); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		v2, err := reports.ParseVerdict("again.json", once.Bytes())
		if err != nil {
			t.Fatalf("a written verdict does not parse: %v\n%s", err, once.Bytes())
		}
		if err := reports.WriteJSON(&twice, v2); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatalf("write∘parse is not the identity:\n%s\n%s", once.Bytes(), twice.Bytes())
		}
	})
}

// FuzzCheckRender: a history is untrusted input, and every one ReadHistory
// accepts goes through the checkers and every report without a panic (the
// history reader alone was fuzzed before; this is the rest of `check` and
// `report`). Seeds: the checkers' fixtures, and testdata/fuzz/FuzzCheckRender/.
func FuzzCheckRender(f *testing.F) {
	files, _ := filepath.Glob("../checkers/testdata/*.jsonl")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= 16<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := models.ReadHistory(bytes.NewReader(b))
		if err != nil {
			return
		}
		v := checkers.CheckAll(h, models.OrderSaga)
		switch v.Status {
		case models.Valid, models.Invalid, models.Unknown:
		default:
			t.Fatalf("verdict status %q", v.Status)
		}
		for _, r := range v.Results {
			for _, vi := range r.Violations {
				for _, i := range vi.Ops {
					if i < 0 || i >= int64(len(h.Ops)) {
						t.Fatalf("%s cites op %d of %d", r.Checker, i, len(h.Ops))
					}
				}
			}
		}
		render(t, h, v)
		var buf bytes.Buffer
		if err := reports.WriteJSON(&buf, v); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if _, err := reports.ParseVerdict("verdict.json", buf.Bytes()); err != nil {
			t.Fatalf("the checkers' own verdict does not parse: %v", err)
		}
	})
}
