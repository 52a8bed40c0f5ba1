package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestExplorePageIsSelfContained: explore.html plots the campaign's
// coverage, lists the entries that added most and the violations, and
// loads nothing from anywhere.
func TestExplorePageIsSelfContained(t *testing.T) {
	p := ExplorePage{Target: "reference", Mutant: "dual-write", Scenario: "everything", Seed: 7, Budget: 10 * time.Minute, Elapsed: 95 * time.Second, Stopped: "violation",
		Runs: []ExploreRun{
			{N: 1, Name: "c0001", Origin: "fresh seed 3", Status: "valid", New: 90, Kept: true, Coverage: 90, Corpus: 1, AtSeconds: 30, RunSeconds: 30},
			{N: 2, Name: "c0002", Origin: "c0001: shift f2 3→9", Status: "valid", Coverage: 90, Corpus: 1, AtSeconds: 60, RunSeconds: 30},
			{N: 3, Name: "c0003", Origin: "c0001: add kill <script>", Status: "invalid", Violations: []string{"no-lost-event/lost"}, New: 4, Coverage: 94, Corpus: 1, AtSeconds: 95, RunSeconds: 35},
		},
		Categories: []ExploreCount{{"step", 40}, {"point-under", 12}},
		Top:        []ExploreEntry{{Name: "c0001", Origin: "fresh seed 3", Added: 90, Sample: []string{"step kill@payment | ChargePayment"}}},
		Violations: []ExploreGroup{{Signature: "no-lost-event/lost", Runs: []string{"c0003"}, Replay: "sagachaos repro runs/c0003"}},
	}
	var b bytes.Buffer
	if err := WriteExplore(&b, p); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<svg", "polyline", "class=\"viol\"", "step kill@payment | ChargePayment", "no-lost-event/lost", "sagachaos repro runs/c0003", "c0001: shift f2 3→9", "94</b>features reached"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, not := range []string{"<script", "http://", "https://", "src="} {
		if strings.Contains(s, not) {
			t.Errorf("page has %q: it must be self-contained and escape what it shows", not)
		}
	}
}
