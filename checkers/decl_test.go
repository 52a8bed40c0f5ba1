package checkers

import (
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// domainHistory is a small outbox-only history without seq headers: one
// aggregate's two rows, published, and their records in the log in the
// order given.
func domainHistory(decl models.TargetDecl, firstInLog, secondInLog string) *models.History {
	var ops []models.Op
	add := func(proc string, typ models.OpType, f, order string, v any) {
		op := mkOp(proc, typ, f, order, v)
		op.I = int64(len(ops))
		ops = append(ops, op)
	}
	add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{Target: "t", Scenario: "s"})
	add(models.ProcHarness, models.Info, models.FTarget, "", decl)
	add("client-0", models.Invoke, "register", "", models.StartSaga{Key: "k-1", Body: []byte(`{"user":"u-1"}`)})
	add("client-0", models.Ok, "register", "a-1", models.PlaceOrderReply{Key: "k-1", Status: 201, Order: "a-1"})
	ev := map[string]int64{"e-1": 0, "e-2": 1}
	for i, id := range []string{firstInLog, secondInLog} {
		add(models.ProcObserver, models.Event, "Registered", "a-1", models.EventRecord{Topic: "users", Partition: 0, Offset: int64(i), Key: "a-1", EventID: id})
		_ = ev
	}
	add(models.ProcObserver, models.State, models.FKafkaSnapshot, "", models.KafkaSnapshot{Topics: []string{"users"}, Records: 2, Complete: true})
	add(models.ProcObserver, models.State, models.FOutboxRow, "a-1", models.OutboxRow{DB: "users", ID: 10, EventID: "e-1", Type: "Registered", Topic: "users", Published: true})
	add(models.ProcObserver, models.State, models.FOutboxRow, "a-1", models.OutboxRow{DB: "users", ID: 11, EventID: "e-2", Type: "Registered", Topic: "users", Published: true})
	add(models.ProcObserver, models.State, models.FOutboxSnapshot, "", models.OutboxSnapshot{DB: "users", Rows: 2, Complete: true})
	add(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int64{"elapsed_ms": 1})
	return &models.History{Ops: ops}
}

// An outbox-only target: the saga checkers are not applicable (valid, with
// the reason), the outbox ones judge; without seq headers, the order of an
// aggregate's outbox rows is the order its records must first appear in.
func TestOutboxOnlyAndSeqFromOutbox(t *testing.T) {
	decl := models.TargetDecl{Name: "t", OutboxOnly: true, SeqFromOutbox: true, StartOp: "register"}
	in := CheckAll(domainHistory(decl, "e-1", "e-2"), models.OrderSaga)
	out := CheckAll(domainHistory(decl, "e-2", "e-1"), models.OrderSaga)
	for _, r := range in.Results {
		switch {
		case sagaCheckers[r.Checker] || r.Checker == "conservation":
			if r.Status != models.Valid || r.NotApplicable == "" {
				t.Errorf("%s: %s %q, want valid and not applicable", r.Checker, r.Status, r.NotApplicable)
			}
		case r.NotApplicable != "" && (r.Checker == "no-lost-event" || r.Checker == "no-phantom-event" || r.Checker == "per-aggregate-order"):
			t.Errorf("%s is not applicable on an outbox-only target: %s", r.Checker, r.NotApplicable)
		}
	}
	get := func(v models.Verdict, name string) models.CheckResult {
		for _, r := range v.Results {
			if r.Checker == name {
				return r
			}
		}
		t.Fatalf("no %s", name)
		return models.CheckResult{}
	}
	if r := get(in, "per-aggregate-order"); r.Status != models.Valid || r.Stats["events-skipped"] != 0 {
		t.Errorf("in order: %+v", r)
	}
	if r := get(out, "per-aggregate-order"); r.Status != models.Invalid || r.Violations[0].Kind != "reordered" {
		t.Errorf("row 11 published before row 10: %+v", r)
	}
	if r := get(in, "client-idempotency"); r.Status != models.Valid || r.NotApplicable != "" || r.Stats["keys"] != 1 {
		t.Errorf("client-idempotency reads the start op the target declares: %+v", r)
	}
	// The same history declaring seq headers skips the seq-less records.
	decl.SeqFromOutbox = false
	if r := get(CheckAll(domainHistory(decl, "e-2", "e-1"), models.OrderSaga), "per-aggregate-order"); r.Status != models.Valid || r.Stats["events-skipped"] != 2 {
		t.Errorf("with seq headers declared: %+v", r)
	}
}

// A history with no target op, or one that predates the domain fields, is
// judged as the order domain (the saved-run corpus is of this kind).
func TestOlderDeclarationIsTheOrderDomain(t *testing.T) {
	h := domainHistory(models.TargetDecl{Name: "reference", Relays: []string{"relay"}}, "e-1", "e-2")
	ix := NewIndex(h, models.OrderSaga)
	if ix.NoSaga || len(ix.Resources) != 2 || ix.Spec.Success != models.StatusApproved {
		t.Fatalf("index %+v", ix)
	}
}
