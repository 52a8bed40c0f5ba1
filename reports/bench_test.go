package reports

import (
	"fmt"
	"io"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// largeRun builds a history of about n ops: sagas of ~11 ops each, a fault
// window every 500 orders, and one double refund every 1000 orders.
func largeRun(n int) (*models.History, models.Verdict) {
	b := newHist()
	b.step = 200_000
	var viols []models.Violation
	for k := 0; len(b.h.Ops) < n; k++ {
		order := fmt.Sprintf("o-%d", k)
		if k%500 == 250 {
			b.fault("link-down", fmt.Sprintf("f%d", k), models.PhaseStart, "relay-1→kafka")
		}
		refunds := 0
		if k%1000 == 999 {
			refunds = 2
		}
		_, r := b.saga(fmt.Sprintf("client-%d", k%8), order, int64(100+k), refunds, "")
		if refunds == 2 {
			viols = append(viols, models.Violation{Checker: "no-double-effect", Kind: "double-refund", Order: order, Message: "refunded twice", Ops: r})
		}
		if k%500 == 260 {
			b.fault("link-down", fmt.Sprintf("f%d", k-10), models.PhaseEnd, "relay-1→kafka")
		}
	}
	v := models.Verdict{Status: models.Invalid, Ops: len(b.h.Ops), Run: models.RunInfo{Target: "reference", Scenario: "large", Seed: 1, Repro: "sagachaos run --scenario large --seed 1"},
		Results: []models.CheckResult{{Checker: "no-double-effect", Status: models.Invalid, Violations: viols}, {Checker: "pivot", Status: models.Valid}}}
	return b.h, v
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkWriteHTML100k renders the report of a 100k-op run; it reports
// the file size as bytes/report.
func BenchmarkWriteHTML100k(b *testing.B) {
	h, v := largeRun(100_000)
	var size int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cw := &countWriter{}
		if err := WriteHTML(cw, h, v, HTMLOptions{}); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size), "bytes/report")
	b.ReportMetric(float64(len(h.Ops)), "ops")
}

func BenchmarkWriteJUnit(b *testing.B) {
	_, v := largeRun(100_000)
	for b.Loop() {
		if err := WriteJUnit(io.Discard, v); err != nil {
			b.Fatal(err)
		}
	}
}
