package harness

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// The CDC fault kinds on the reference's CDC flavour: each applies at its
// trigger, aims at whoever holds the slot at that moment, is undone, and
// journals what took effect (the holder, who took the slot over, how far
// the lag grew, where the confirmed position was before and after a
// crash); the run stays valid and the slots are sampled all along.
func TestCDCFaultKindsApplyUndoAndJournal(t *testing.T) {
	ctx := context.Background()
	m, err := target.Find("reference-cdc")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.Load("calm")
	if err != nil {
		t.Fatal(err)
	}
	spec.Sagas = scenarios.Range{Min: 100, Max: 100}
	spec.GapMS = scenarios.Range{Min: 60, Max: 60}
	spec.Clients = scenarios.Range{Min: 1, Max: 1}
	spec.BurstRate = 0
	spec.Relays = scenarios.Range{Min: 2, Max: 2}
	sc, err := scenarios.Generate(spec, 1, target.Catalog(m, fps))
	if err != nil {
		t.Fatal(err)
	}
	kind := func(name string, set func(faults.Kind)) faults.Kind {
		k, err := faults.New(name)
		if err != nil {
			t.Fatal(err)
		}
		if set != nil {
			set(k)
		}
		return k
	}
	ms := func(n int) scenarios.Duration { return scenarios.Duration(time.Duration(n) * time.Millisecond) }
	sc.Faults = []scenarios.Fault{
		// Far enough apart (one client, 60 ms gaps: at most ~16 orders a second, 20 orders ≥ 1.2 s)
		// that no window overlaps the next fault.
		{ID: "f1", Kind: "slot-kill", Target: "orders", AfterOrders: 4, Duration: ms(500), Params: kind("slot-kill", nil)},
		{ID: "f2", Kind: "slot-kill", Target: "inventory", AfterOrders: 24, Duration: ms(400), Params: kind("slot-kill", func(k faults.Kind) { k.(*faults.SlotKill).Who = "waiter" })},
		{ID: "f3", Kind: "slot-stall", Target: "orders", AfterOrders: 44, Duration: ms(500), Params: kind("slot-stall", nil)},
		{ID: "f4", Kind: "slot-failover", Target: "orders", AfterOrders: 64, Duration: ms(500), Params: kind("slot-failover", nil)},
		{ID: "f5", Kind: "slot-db-crash", Target: "orders", AfterOrders: 84, Duration: ms(400), Params: kind("slot-db-crash", nil)},
	}
	res, err := Run(ctx, Options{Manifest: m, Scenario: sc, Bin: bin, RunDir: filepath.Join(runDirFor(t), "run")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Status != models.Valid {
		t.Fatalf("the correct CDC reference is %s under the CDC faults (run %s)", res.Verdict.Status, res.RunDir)
	}
	h, err := models.ReadHistoryFile(filepath.Join(res.RunDir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	invoked := 0
	invokesAt := map[int64]int{} // op index → invokes before it
	journal := map[string][]models.FaultRecord{}
	samples := 0
	for _, op := range h.Ops {
		invokesAt[op.I] = invoked
		if op.Type == models.Invoke && op.Proc != models.ProcNemesis {
			invoked++
		}
		if op.F == models.FSlots {
			samples++
		}
		var fr models.FaultRecord
		if op.Proc == models.ProcNemesis && op.Decode(&fr) == nil && fr.ID != "" {
			if fr.Phase == models.PhaseStart && fr.Detail != nil {
				fr.Detail["_invoked_before"] = strconv.Itoa(invokesAt[op.I])
			}
			journal[fr.ID] = append(journal[fr.ID], fr)
		}
	}
	for _, f := range sc.Faults {
		got := journal[f.ID]
		if len(got) != 2 || got[0].Phase != models.PhaseStart || got[1].Phase != models.PhaseEnd {
			t.Errorf("%s %s journaled %+v, want a start and an end", f.ID, f.Kind, got)
			continue
		}
		for _, fr := range got {
			if fr.Error != "" {
				t.Errorf("%s %s %s failed: %s", f.ID, f.Kind, fr.Phase, fr.Error)
			}
		}
		start, end := got[0].Detail, got[1].Detail
		if end["slot_error"] != "" {
			t.Errorf("%s %s: the slot could not be read when it ended: %s", f.ID, f.Kind, end["slot_error"])
		}
		if n, _ := strconv.Atoi(start["_invoked_before"]); n < f.AfterOrders {
			t.Errorf("%s applied after %d orders, before its trigger (%d)", f.ID, n, f.AfterOrders)
		}
		if start["slot"] == "" || start["effect"] == "" {
			t.Errorf("%s %s: the start does not say what it hit: %v", f.ID, f.Kind, start)
		}
		switch f.Kind {
		case "slot-failover":
			if end["taken_over_by"] == "" || end["taken_over_by"] == "nobody yet" || end["taken_over_by"] == start["instance"] {
				t.Errorf("%s: no takeover journaled: start %v end %v", f.ID, start, end)
			}
		case "slot-stall":
			if n, err := strconv.Atoi(end["lag_grew_bytes"]); err != nil || n <= 0 {
				t.Errorf("%s: the lag did not grow while the holder stalled: %v", f.ID, end)
			}
		case "slot-db-crash":
			if start["confirmed_before"] == "" || end["confirmed_after"] == "" {
				t.Errorf("%s: positions not journaled: start %v end %v", f.ID, start, end)
			}
		}
		t.Logf("%s %s: %v → %v", f.ID, f.Kind, start, end)
	}
	if samples < 10 {
		t.Errorf("%d slot samples in the history", samples)
	}
}

// runDirFor is where a test's run goes: CDC_TEST_RUNS keeps it for a look.
func runDirFor(t *testing.T) string {
	if d := os.Getenv("CDC_TEST_RUNS"); d != "" {
		return filepath.Join(d, strconv.FormatInt(time.Now().UnixNano(), 10))
	}
	return t.TempDir()
}
