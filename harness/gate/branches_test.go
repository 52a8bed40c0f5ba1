package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// writeRun writes a history of ops at the given times (ms) into a run dir.
func writeRun(t *testing.T, ops []models.Op) string {
	t.Helper()
	dir := t.TempDir()
	for i := range ops {
		ops[i].I = int64(i)
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := models.WriteHistory(f, &models.History{Header: models.Header{Format: models.HistoryFormat, Version: models.HistoryVersion}, Ops: ops}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func at(ms int, proc string, f string, v any) models.Op {
	b, _ := json.Marshal(v)
	typ := models.Info
	return models.Op{T: int64(time.Duration(ms) * time.Millisecond), Proc: proc, Type: typ, F: f, Value: b}
}

func fault(ms int, id, kind, phase, target string, detail map[string]string) models.Op {
	return at(ms, models.ProcNemesis, kind, models.FaultRecord{ID: id, Kind: kind, Phase: phase, Target: target, Detail: detail})
}

func marker(ms int, inst, name string) models.Op {
	return at(ms, models.ProcComponentPrefix+inst, models.FFailpoint, models.FailpointEvent{Instance: inst, Failpoint: name, Hit: 1})
}

// The matrix counts a branch as reached under a fault when it was taken
// inside the fault's window or its wake, under its own component when the
// fault held that component (a link of it, the instance, or the whole
// system), and a declared branch never reached under a fault is a hole.
func TestBranchCoverage(t *testing.T) {
	declared := []targets.Failpoint{
		{Name: "orders.timeout.charging", Component: "orders", Kind: targets.KindMarker},
		{Name: "payment.declined", Component: "payment", Kind: targets.KindMarker},
		{Name: "relay.aggregate-skipped", Component: "relay", Kind: targets.KindMarker},
		{Name: "inventory.redelivered", Component: "inventory", Kind: targets.KindMarker},
		{Name: "relay.after-mark", Component: "relay"}, // a failpoint: not a row
	}
	run1 := writeRun(t, []models.Op{
		marker(100, "payment", "payment.declined"), // before any fault
		fault(1000, "f1", "pause", models.PhaseStart, "payment", nil),
		fault(3000, "f1", "pause", models.PhaseEnd, "payment", nil),
		marker(6000, "orders", "orders.timeout.charging"), // in f1's wake, f1 is on payment
		fault(20000, "f2", "latency", models.PhaseStart, "relay-2→postgres", nil),
		marker(20500, "relay-2", "relay.aggregate-skipped"), // own component's link
		fault(21000, "f2", "latency", models.PhaseEnd, "relay-2→postgres", nil),
		fault(40000, "f3", "db-crash", models.PhaseStart, "", nil),
		fault(40100, "f3", "db-crash", models.PhaseEnd, "", nil),
		marker(40500, "inventory", "inventory.redelivered"), // a whole-system fault holds everyone
		fault(41000, "f4", "failpoint", models.PhaseStart, "relay.after-mark", map[string]string{"effect": "armed"}),
	})
	run2 := writeRun(t, []models.Op{
		marker(100, "orders", "orders.timeout.charging"), // no fault at all
		fault(50000, "f1", "gateway-ambiguous", models.PhaseInstant, "", nil),
		marker(60000, "relay-1", "relay.aggregate-skipped"), // past the instant's wake
	})
	b := BranchCoverage([]string{run1, run2}, declared)
	row := map[string]BranchRow{}
	for _, r := range b.Rows {
		row[r.Marker.Name] = r
	}
	if len(b.Rows) != 4 {
		t.Fatalf("%d rows, want the 4 markers only", len(b.Rows))
	}
	check := func(name string, reached, faulted, own int, kinds ...string) {
		t.Helper()
		r := row[name]
		if r.Reached != reached || r.Faulted != faulted || r.Own != own {
			t.Errorf("%s: reached %d faulted %d own %d, want %d %d %d", name, r.Reached, r.Faulted, r.Own, reached, faulted, own)
		}
		var got []string
		for k := range r.ByKind {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, kinds) {
			t.Errorf("%s: kinds %v, want %v", name, got, kinds)
		}
	}
	check("orders.timeout.charging", 2, 1, 0, "pause")
	check("payment.declined", 1, 0, 0)
	check("relay.aggregate-skipped", 2, 1, 1, "latency")
	check("inventory.redelivered", 1, 1, 1, "db-crash")
	if h := b.Holes(); !slices.Equal(h, []string{"payment.declined"}) {
		t.Errorf("holes %v, want payment.declined", h)
	}
	var out strings.Builder
	b.Write(&out)
	if !strings.Contains(out.String(), "orders.timeout.charging") || !strings.Contains(out.String(), "wake") {
		t.Errorf("matrix:\n%s", out.String())
	}
}
