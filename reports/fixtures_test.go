package reports

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// histBuilder builds fixture histories: ops get dense indices and a clock
// that advances by step per op unless set with at.
type histBuilder struct {
	h    *models.History
	now  int64
	step int64
}

func newHist() *histBuilder {
	return &histBuilder{h: &models.History{Header: models.Header{Format: models.HistoryFormat, Version: models.HistoryVersion,
		Started: "2026-11-30T02:00:00Z", Run: "fixture"}}, step: 3_000_000}
}

// add appends an op and returns its index.
func (b *histBuilder) add(proc string, typ models.OpType, f, order string, v any) int64 {
	var raw json.RawMessage
	if v != nil {
		bs, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		raw = bs
	}
	b.now += b.step
	i := int64(len(b.h.Ops))
	b.h.Ops = append(b.h.Ops, models.Op{I: i, T: b.now, Proc: proc, Type: typ, F: f, Order: order, Value: raw})
	return i
}

func (b *histBuilder) fault(kind, id, phase, target string) int64 {
	return b.add(models.ProcNemesis, models.Info, kind, "", models.FaultRecord{ID: id, Kind: kind, Phase: phase, Target: target})
}

// saga records one order's happy or refunded path and returns the indices
// of the ops a checker would cite: the charge and the refunds.
func (b *histBuilder) saga(client, order string, total int64, refunds int, payload string) (charge int64, refundOps []int64) {
	b.add(client, models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k-" + order, Customer: "c1", Items: []models.Item{{SKU: "sku-1", Qty: 1}}, Card: "4242", Total: total})
	b.add(client, models.Ok, models.FPlaceOrder, order, models.PlaceOrderReply{Key: "k-" + order, Status: 202, Order: order})
	ev := func(typ string, seq int64) {
		pl, _ := json.Marshal(map[string]string{"order": order, "note": payload})
		b.add(models.ProcObserver, models.Event, typ, order, models.EventRecord{Topic: "orders", Partition: 0, Offset: seq, Key: order, EventID: fmt.Sprintf("%s-%d", order, seq), Seq: seq, Source: "orders", Payload: pl})
	}
	ev("OrderCreated", 1)
	ev("StockReserved", 2)
	charge = b.add(models.ProcGateway, models.Effect, models.FCharge, order, models.ChargeEffect{ChargeID: "ch-" + order, Amount: total, Card: "4242", IdempotencyKey: "pay-" + order, Status: models.ChargeSucceeded})
	for r := 0; r < refunds; r++ {
		refundOps = append(refundOps, b.add(models.ProcGateway, models.Effect, models.FRefund, order, models.RefundEffect{RefundID: fmt.Sprintf("re-%s-%d", order, r), ChargeID: "ch-" + order, Amount: total, Status: "succeeded"}))
	}
	status := "APPROVED"
	if refunds > 0 {
		status = "CANCELLED"
		ev("PaymentRefunded", 3)
	} else {
		b.add(models.ProcCarrier, models.Effect, models.FShipment, order, models.ShipmentEffect{ShipmentID: "sh-" + order})
		b.add(models.ProcMailer, models.Effect, models.FEmail, order, models.EmailEffect{EmailID: "em-" + order, Kind: "confirmation", To: "c1@example.com"})
		ev("OrderApproved", 3)
	}
	b.add(models.ProcObserver, models.State, models.FOrderState, order, models.OrderState{Status: status, Total: total})
	return charge, refundOps
}

// failingRun is a small run in which order o-17 was refunded twice while
// the link relay-1→kafka was down and relay-1 was killed.
func failingRun() (*models.History, models.Verdict) {
	b := newHist()
	b.add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{Target: "reference", Mutant: "non-idempotent-compensation", Scenario: "redelivery", Seed: 42})
	b.saga("client-1", "o-1", 1000, 0, "")
	b.saga("client-2", "o-2", 1500, 0, "")
	b.fault("link-down", "f1", models.PhaseStart, "relay-1→kafka")
	_, refunds := b.saga("client-3", "o-17", 2500, 2, "")
	b.fault("kill", "f2", models.PhaseInstant, "relay-1")
	b.fault("link-down", "f1", models.PhaseEnd, "relay-1→kafka")
	b.saga("client-1", "o-18", 700, 1, "")
	b.add(models.ProcObserver, models.State, models.FQuiesce, "", models.Quiesce{AllTerminal: true, WaitedMS: 120, DeadlineMS: 30000})
	v := models.Verdict{Version: models.VerdictVersion, Status: models.Invalid, Ops: len(b.h.Ops),
		HistoryDigest: "sha256:9f2c6a0b3d5e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708",
		Run: models.RunInfo{ID: "20261130-redelivery-42", Target: "reference", Mutant: "non-idempotent-compensation", Scenario: "redelivery", Seed: 42,
			Repro: "sagachaos run --target reference --mutant non-idempotent-compensation --scenario redelivery --seed 42"},
		Results: []models.CheckResult{
			{Checker: "no-double-effect", Status: models.Invalid, Violations: []models.Violation{{
				Checker: "no-double-effect", Kind: "double-refund", Order: "o-17",
				Message: "order o-17 was refunded 2 times (re-o-17-0, re-o-17-1) for one charge ch-o-17", Ops: refunds}},
				Stats: map[string]int64{"orders": 4}},
			{Checker: "pivot", Status: models.Valid, Stats: map[string]int64{"orders": 4}},
			{Checker: "no-lost-event", Status: models.Unknown, Unknown: "no outbox snapshot in the history"},
		}}
	return b.h, v
}

// at sets the clock to t (ns since the run's start) for the next op.
func (b *histBuilder) at(t int64) *histBuilder { b.now = t - b.step; return b }

func (b *histBuilder) comp(inst, f string, v any) int64 {
	return b.add(models.ProcComponentPrefix+inst, models.Info, f, "", v)
}

// logStamp is the wall time of t in the fixtures' run (for log lines).
func logStamp(t int64) string {
	return time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC).Add(time.Duration(t)).Format(time.RFC3339Nano)
}

// relayCrashRun follows the component-op contract (models/target.go): two
// relays, relay-2 crashes at failpoint relay.after-mark right after taking
// o-96's ReserveStock row and is restarted; relay-1 is killed and
// restarted by the nemesis while relay-2→kafka is down (three fault labels
// that start within a few ms of each other); the row is marked published
// but never reached the log. It returns the history, the verdict and the
// process logs as the supervisor writes them.
func relayCrashRun() (*models.History, models.Verdict, map[string]string) {
	b := newHist()
	ms := int64(time.Millisecond)
	b.add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{Target: "reference", Mutant: "mark-before-ack", Scenario: "relay-publish-crash", Seed: 1})
	b.add(models.ProcHarness, models.Info, models.FTarget, "", models.TargetDecl{Name: "reference", Relays: []string{"relay-1", "relay-2"}, Instances: []string{"orders", "relay-1", "relay-2"}})
	logs := map[string]*strings.Builder{}
	logf := func(inst string, t int64, format string, args ...any) {
		if logs[inst] == nil {
			logs[inst] = &strings.Builder{}
		}
		fmt.Fprintf(logs[inst], format+"\n", args...)
	}
	start := func(inst string, t int64, inc int, cause string) {
		b.at(t).comp(inst, models.FComponentStart, models.ComponentEvent{Instance: inst, Incarnation: inc, Pid: 4000 + inc, Cause: cause})
		logf(inst, t, "=== sagachaos: start #%d at %s: /bin/reftarget %s ===", inc, logStamp(t), inst)
		logf(inst, t+2*ms, `{"time":%q,"level":"INFO","msg":"started","instance":%q}`, logStamp(t+2*ms), inst)
		b.at(t+20*ms).comp(inst, models.FComponentHealthy, models.ComponentEvent{Instance: inst, Incarnation: inc, WaitedMS: 20})
		logf(inst, t+20*ms, `{"time":%q,"level":"INFO","msg":"healthy","instance":%q}`, logStamp(t+20*ms), inst)
	}
	start("orders", 100*ms, 1, "initial")
	start("relay-1", 101*ms, 1, "initial")
	start("relay-2", 102*ms, 1, "initial")
	b.at(130*ms).comp("relay-2", models.FFailpoint, models.FailpointEvent{Instance: "relay-2", Failpoint: "relay.after-select", Hit: 1})
	b.at(200 * ms)
	b.saga("client-1", "o-1", 1000, 0, "")
	b.at(400 * ms)
	b.add("client-3", models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k-o-96", Customer: "c1", Items: []models.Item{{SKU: "sku-1", Qty: 1}}, Card: "4242", Total: 700})
	accepted := b.add("client-3", models.Ok, models.FPlaceOrder, "o-96", models.PlaceOrderReply{Key: "k-o-96", Status: 202, Order: "o-96"})
	// Three fault windows within 4 ms: their labels would collide.
	b.at(440*ms).fault("link-down", "f3", models.PhaseStart, "relay-2→kafka")
	b.at(441*ms).fault("kill", "f4", models.PhaseStart, "relay-1")
	b.at(441*ms).comp("relay-1", models.FComponentExit, models.ComponentEvent{Instance: "relay-1", Incarnation: 1, Status: "signal: killed", Expected: true, Cause: "fault:f4"})
	logf("relay-1", 441*ms, `{"time":%q,"level":"INFO","msg":"relay poll","instance":"relay-1"}`, logStamp(430*ms))
	b.at(444*ms).fault("latency", "f5", models.PhaseStart, "orders→postgres")
	logf("relay-2", 449*ms, `{"time":%q,"level":"INFO","msg":"publish batch","instance":"relay-2","rows":1}`, logStamp(449*ms))
	fired := b.at(450*ms).comp("relay-2", models.FFailpoint, models.FailpointEvent{Instance: "relay-2", Failpoint: "relay.after-mark", Hit: 3, Action: "crash", Fired: true})
	logf("relay-2", 450*ms, "failpoint relay.after-mark: crash at hit 3")
	exit := b.at(454*ms).comp("relay-2", models.FComponentExit, models.ComponentEvent{Instance: "relay-2", Incarnation: 1, Status: "signal: killed"})
	b.at(455*ms).add(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: "crash1", Kind: "crash", Phase: models.PhaseInstant, Target: "relay-2",
		Detail: map[string]string{"exit": "signal: killed", "armed_failpoints": "relay.after-mark"}})
	b.at(470*ms).fault("link-down", "f3", models.PhaseEnd, "relay-2→kafka")
	b.at(480*ms).fault("latency", "f5", models.PhaseEnd, "orders→postgres")
	start("relay-1", 600*ms, 2, "fault:f4")
	b.at(640*ms).fault("kill", "f4", models.PhaseEnd, "relay-1")
	start("relay-2", 650*ms, 2, "crash-restart")
	b.at(675*ms).add(models.ProcNemesis, models.Info, "restart", "", models.FaultRecord{ID: "crash1", Kind: "restart", Phase: models.PhaseInstant, Target: "relay-2"})
	b.at(700*ms).fault("pause", "f6", models.PhaseStart, "relay-1")
	b.at(900*ms).fault("pause", "f6", models.PhaseEnd, "relay-1")
	b.at(1000 * ms)
	pl, _ := json.Marshal(map[string]string{"order": "o-96"})
	b.add(models.ProcObserver, models.Event, "OrderCreated", "o-96", models.EventRecord{Topic: "orders", Partition: 2, Offset: 7, Key: "o-96", EventID: "ev-96-1", Seq: 1, Source: "orders", Payload: pl})
	b.add(models.ProcObserver, models.State, models.FOrderState, "o-96", models.OrderState{Status: "PENDING", Total: 700})
	row := b.add(models.ProcObserver, models.State, models.FOutboxRow, "o-96", models.OutboxRow{DB: "orders", ID: 96, EventID: "ev-96-2", Seq: 2, Type: "ReserveStock", Topic: "orders", Published: true})
	// the closing snapshots count the rows recorded before them, as the
	// observer's do (a checker does not trust a snapshot that miscounts)
	var events, rows int
	for _, op := range b.h.Ops {
		switch {
		case op.Type == models.Event:
			events++
		case op.F == models.FOutboxRow:
			rows++
		}
	}
	b.add(models.ProcObserver, models.State, models.FOutboxSnapshot, "", models.OutboxSnapshot{DB: "orders", Rows: rows, Complete: true})
	snap := b.add(models.ProcObserver, models.State, models.FKafkaSnapshot, "", models.KafkaSnapshot{Topics: []string{"orders"}, Records: events, Complete: true})
	b.add(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int{"elapsed_ms": 1100})
	_ = accepted
	_ = fired
	_ = exit
	v := models.Verdict{Version: models.VerdictVersion, Status: models.Invalid, Ops: len(b.h.Ops),
		Run: models.RunInfo{ID: "fixture-relay-crash", Target: "reference", Mutant: "mark-before-ack", Scenario: "relay-publish-crash", Seed: 1,
			Repro: "sagachaos run --target reference --mutant mark-before-ack --scenario relay-publish-crash --seed 1"},
		Results: []models.CheckResult{{Checker: "no-lost-event", Status: models.Invalid, Violations: []models.Violation{{
			Checker: "no-lost-event", Kind: "lost-event", Order: "o-96",
			Message: "outbox row orders#96 ReserveStock (event ev-96-2) marked published but not in the complete Kafka log", Ops: []int64{row, snap}}}}}}
	out := map[string]string{}
	for k, sb := range logs {
		out[k+".log"] = sb.String()
	}
	return b.h, v, out
}
