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

// seqHistory is one aggregate of an outbox-only target: its outbox rows
// (db users, ids from 10) and the records in the log, each with the seq
// given (0: no seq header or column).
func seqHistory(decl models.TargetDecl, rows []models.OutboxRow, log []models.EventRecord) *models.History {
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
	for i, e := range log {
		e.Topic, e.Offset, e.Key, e.Source = "users", int64(i), "a-1", "users"
		add(models.ProcObserver, models.Event, "Registered", "a-1", e)
	}
	add(models.ProcObserver, models.State, models.FKafkaSnapshot, "", models.KafkaSnapshot{Topics: []string{"users"}, Records: len(log), Complete: true})
	for _, r := range rows {
		r.DB, r.Type, r.Topic = "users", "Registered", "users"
		add(models.ProcObserver, models.State, models.FOutboxRow, "a-1", r)
	}
	add(models.ProcObserver, models.State, models.FOutboxSnapshot, "", models.OutboxSnapshot{DB: "users", Rows: len(rows), Complete: true})
	add(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int64{"elapsed_ms": 1})
	return &models.History{Ops: ops}
}

// Seq from the outbox: seq-gap is judged on the rows' ranks (a row not in
// the log below a later row of the aggregate that is), and vanished-row is
// not applicable — the ranks of the rows still there have no gap where a
// row was deleted before publication — where the same history with seqs
// of the target's own is a vanished row.
func TestSeqFromOutboxGapsAndVanishedRows(t *testing.T) {
	outboxOnly := models.TargetDecl{Name: "t", OutboxOnly: true, SeqFromOutbox: true, StartOp: "register"}
	order := func(h *models.History) models.CheckResult {
		t.Helper()
		for _, r := range CheckAll(h, models.OrderSaga).Results {
			if r.Checker == "per-aggregate-order" {
				return r
			}
		}
		t.Fatal("no per-aggregate-order result")
		return models.CheckResult{}
	}
	// a gap: row 10 committed and unpublished, row 11 in the log
	gap := seqHistory(outboxOnly,
		[]models.OutboxRow{{ID: 10, EventID: "e-1"}, {ID: 11, EventID: "e-2", Published: true}},
		[]models.EventRecord{{EventID: "e-2"}})
	if r := order(gap); r.Status != models.Invalid || r.Violations[0].Kind != "seq-gap" || r.RulesNotApplicable["vanished-row"] == "" {
		t.Errorf("seq from outbox, row 10 skipped: %+v", r)
	}
	// row 10 deleted before publication: only row 11 and its record remain
	vanished := func(decl models.TargetDecl, seq int64) *models.History {
		return seqHistory(decl, []models.OutboxRow{{ID: 11, EventID: "e-2", Seq: seq, Published: true}}, []models.EventRecord{{EventID: "e-2", Seq: seq}})
	}
	r := order(vanished(outboxOnly, 0))
	if r.Status != models.Valid || r.NotApplicable != "" || r.RulesNotApplicable["vanished-row"] == "" {
		t.Errorf("seq from outbox: %+v, want valid with vanished-row not applicable", r)
	}
	if _, counted := r.Stats["seqs-vanished"]; counted {
		t.Errorf("vanished rows counted where the rule does not apply: %+v", r.Stats)
	}
	withSeq := outboxOnly
	withSeq.SeqFromOutbox = false
	if r := order(vanished(withSeq, 2)); r.Status != models.Invalid || r.Violations[0].Kind != "vanished-row" || r.RulesNotApplicable != nil {
		t.Errorf("seq 1 in neither the outbox nor the log: %+v", r)
	}
}
