package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// slotRun is a CDC run's slot samples: orders' lag grows while its holder
// is stalled, the server is unreadable once (a crash), the holder changes
// from relay-1 to relay-2, and a final sample at observation.
func slotRun() *models.History {
	b := newHist()
	sample := func(at string, orders, stock int64, holder string) {
		b.add(models.ProcObserver, models.Info, models.FSlots, "", models.SlotSample{At: at, Slots: []models.SlotState{
			{DB: "orders", Slot: "outbox_orders", Exists: true, Active: true, Holder: holder, ConfirmedLSN: "0/1", LagBytes: orders, RetainedBytes: 2 * orders},
			{DB: "stock", Slot: "outbox_stock", Exists: true, Active: true, Holder: holder, ConfirmedLSN: "0/2", LagBytes: stock},
		}})
	}
	sample(models.SlotsDuringRun, 100, 10, "relay-1")
	b.fault("slot-stall", "f1", models.PhaseStart, "relay-1")
	sample(models.SlotsDuringRun, 4000, 10, "relay-1")
	sample(models.SlotsDuringRun, 64000, 20, "relay-1")
	b.fault("slot-stall", "f1", models.PhaseEnd, "relay-1")
	b.add(models.ProcObserver, models.Info, models.FSlots, "", models.SlotSample{At: models.SlotsDuringRun, Error: "connection refused"})
	sample(models.SlotsDuringRun, 500, 20, "relay-2")
	sample(models.SlotsAtObserve, 0, 0, "relay-2")
	return b.h
}

// A CDC run's report draws each slot's lag over time: one line per slot,
// broken where the server could not be read, the fault window behind it, a
// mark where the holder changed, and each slot as observed.
func TestSlotChartDrawsLagOverTime(t *testing.T) {
	h := slotRun()
	c := buildSlotChart(h, faultWindows(h))
	if !c.Any || c.Samples != 6 || c.Unreadable != 1 || len(c.Lines) != 2 {
		t.Fatalf("chart: any %v, %d samples, %d unreadable, %d lines", c.Any, c.Samples, c.Unreadable, len(c.Lines))
	}
	orders := c.Lines[0]
	if orders.DB != "orders" || len(orders.Points) != 2 || orders.Max != humanBytes(64000) {
		t.Fatalf("orders line %+v: want two polylines (split at the unreadable sample), max %s", orders, humanBytes(64000))
	}
	// the y axis is the largest lag: the stalled sample touches the top
	pts := strings.Fields(orders.Points[0])
	if len(pts) != 3 || !strings.HasSuffix(pts[2], ","+f1(float64(c.PlotTop))) || !strings.HasSuffix(pts[0], ","+f1(float64(c.AxisY)-100.0/64000*slPlotH)) {
		t.Fatalf("orders points %v (plot top %d, axis %d)", pts, c.PlotTop, c.AxisY)
	}
	if len(c.HolderMarks) != 2 || !strings.Contains(c.HolderMarks[0].Title, "relay-1 → relay-2") {
		t.Fatalf("holder marks %+v", c.HolderMarks)
	}
	if len(c.Faults) != 1 || !strings.Contains(c.Faults[0].Title, "slot-stall") {
		t.Fatalf("fault windows %+v", c.Faults)
	}
	if len(c.Final) != 2 || c.Final[0].DB != "orders" || c.Final[0].Holder != "relay-2" {
		t.Fatalf("at observation %+v", c.Final)
	}
	var buf bytes.Buffer
	v := models.Verdict{Status: models.Valid, Run: models.RunInfo{Target: "reference-cdc", Scenario: "everything", Seed: 1}}
	if err := WriteHTML(&buf, h, v, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`<section id="slots">`, "Replication slots", `aria-label="replication slot lag over time"`, `class="slotlag"`, "orders (max " + humanBytes(64000) + ")", "outbox_stock"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	if n := strings.Count(page, `class="slotlag"`); n != 4 {
		t.Errorf("%d slot polylines in the report, want 4 (each slot split in two at the unreadable sample)", n)
	}
}

// A run without slot samples (a polling relay) has no slot chart.
func TestNoSlotChartWithoutSamples(t *testing.T) {
	b := newHist()
	b.saga("client-1", "o-1", 100, 0, "")
	if c := buildSlotChart(b.h, nil); c.Any {
		t.Fatalf("a chart without samples: %+v", c)
	}
}
