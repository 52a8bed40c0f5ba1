package reports

import (
	"encoding/json"
	"fmt"

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
