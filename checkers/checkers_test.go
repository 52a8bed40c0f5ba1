package checkers

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

func TestCatalogue(t *testing.T) {
	all := All(models.OrderSaga)
	ds := Describe()
	if len(all) != 12 || len(ds) != len(all) {
		t.Fatalf("%d checkers, %d descriptions, want 12", len(all), len(ds))
	}
	for i, c := range all {
		if c.Name() != ds[i].Name || ds[i].Invariant == "" || ds[i].Evidence == "" {
			t.Errorf("checker %d: %q vs description %+v", i, c.Name(), ds[i])
		}
		if l, ok := Lookup(c.Name(), models.OrderSaga); !ok || l.Name() != c.Name() {
			t.Errorf("Lookup(%q) = %v, %v", c.Name(), l, ok)
		}
	}
	if _, ok := Lookup("nope", models.OrderSaga); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}

// ops builds a small history by hand.
type opsBuilder struct{ ops []models.Op }

func (b *opsBuilder) add(proc string, typ models.OpType, f, order string, v any) *opsBuilder {
	raw, _ := json.Marshal(v)
	b.ops = append(b.ops, models.Op{I: int64(len(b.ops)), Proc: proc, Type: typ, F: f, Order: order, Value: raw})
	return b
}

func (b *opsBuilder) history() *models.History { return &models.History{Ops: b.ops} }

// Small hand-made cases for rules the generator does not reach.
func TestRules(t *testing.T) {
	approved := func(b *opsBuilder, id string) *opsBuilder {
		return b.add(models.ProcObserver, models.State, models.FOrderState, id, models.OrderState{Status: models.StatusApproved, Total: 100})
	}
	charge := func(b *opsBuilder, id string, replay bool) *opsBuilder {
		return b.add(models.ProcGateway, models.Effect, models.FCharge, id, models.ChargeEffect{ChargeID: "ch-" + id, Amount: 100, Status: models.ChargeSucceeded, Replay: replay})
	}
	cases := []struct {
		name, checker string
		h             *models.History
		want          models.Status
		kind          string
	}{
		{"refund named by its charge only is attributed to the order", "pivot",
			func() *models.History {
				b := charge(&opsBuilder{}, "o-1", false)
				b.add(models.ProcGateway, models.Effect, models.FRefund, "", models.RefundEffect{ChargeID: "ch-o-1", Amount: 100, Status: "succeeded"})
				return approved(b, "o-1").history()
			}(), models.Invalid, "pivot-compensated"},
		{"a replayed charge is not a second charge", "no-double-effect",
			approved(charge(charge(&opsBuilder{}, "o-1", false), "o-1", true), "o-1").history(), models.Valid, ""},
		{"a declined charge then a successful one is one charge", "no-double-effect",
			func() *models.History {
				b := (&opsBuilder{}).add(models.ProcGateway, models.Effect, models.FCharge, "o-1", models.ChargeEffect{Amount: 100, Status: models.ChargeDeclined})
				return charge(b, "o-1", false).history()
			}(), models.Valid, ""},
		{"two ok replies for one key with two orders", "client-idempotency",
			(&opsBuilder{}).
				add("client-1", models.Ok, models.FPlaceOrder, "o-1", models.PlaceOrderReply{Key: "k", Order: "o-1"}).
				add("client-2", models.Ok, models.FPlaceOrder, "o-2", models.PlaceOrderReply{Key: "k", Order: "o-2"}).history(),
			models.Invalid, "key-reused"},
		{"info place-order whose order never appears proves nothing", "saga-terminates",
			(&opsBuilder{}).
				add("client-1", models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k"}).
				add("client-1", models.Info, models.FPlaceOrder, "", models.ClientFailure{Key: "k", Error: "timeout"}).
				add(models.ProcObserver, models.State, models.FQuiesce, "", models.Quiesce{AllTerminal: true}).history(),
			models.Valid, ""},
		{"acknowledged order without any final state is unknown", "saga-terminates",
			(&opsBuilder{}).add("client-1", models.Ok, models.FPlaceOrder, "o-1", models.PlaceOrderReply{Key: "k", Order: "o-1"}).history(),
			models.Unknown, ""},
		{"event of an unkeyed record", "per-aggregate-order",
			(&opsBuilder{}).add(models.ProcObserver, models.Event, "OrderCreated", "o-1", models.EventRecord{Topic: "orders", EventID: "e1", Seq: 1, Source: "orders"}).history(),
			models.Invalid, "unkeyed"},
		{"undecodable effect makes no-double-effect unknown", "no-double-effect",
			&models.History{Ops: []models.Op{{I: 0, Proc: models.ProcGateway, Type: models.Effect, F: models.FCharge, Order: "o-1", Value: json.RawMessage(`{"amount":"lots"}`)}}},
			models.Unknown, ""},
		{"negative stock", "conservation",
			(&opsBuilder{}).add(models.ProcObserver, models.State, models.FStockState, "", models.StockState{SKU: "s", Available: -1}).history(),
			models.Invalid, "negative-stock"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, _ := Lookup(c.checker, models.OrderSaga)
			r := ch.Check(c.h)
			if r.Status != c.want {
				t.Fatalf("%s: %s (%s %v), want %s", c.checker, r.Status, r.Unknown, r.Violations, c.want)
			}
			if c.kind != "" && (len(r.Violations) == 0 || r.Violations[0].Kind != c.kind) {
				t.Fatalf("violations %v, want kind %s", r.Violations, c.kind)
			}
		})
	}
}

// A trip saga (book flight, book hotel, charge) is checked by the same code:
// the spec, not the checkers, names the steps.
func TestOtherSpec(t *testing.T) {
	eff := func(f string) *models.EffectSpec { return &models.EffectSpec{Proc: "world/travel", F: f} }
	trip := models.SagaSpec{Name: "trip", Success: "BOOKED", Failure: "ABORTED", Pending: "PENDING", Steps: []models.Step{
		{Action: models.Action{Name: "flight", Effect: eff("flight")}, Kind: models.Compensatable, Compensation: &models.Action{Name: "cancel-flight", Effect: eff("cancel-flight")}},
		{Action: models.Action{Name: "hotel", Effect: eff("hotel")}, Kind: models.Compensatable, Compensation: &models.Action{Name: "cancel-hotel", Effect: eff("cancel-hotel")}},
		{Action: models.Action{Name: "pay", Effect: eff("pay")}, Kind: models.Pivot},
	}}
	b := &opsBuilder{}
	for _, f := range []string{"flight", "hotel", "cancel-flight", "cancel-hotel"} { // wrong order
		b.add("world/travel", models.Effect, f, "t-1", map[string]string{"id": f})
	}
	b.add(models.ProcObserver, models.State, models.FOrderState, "t-1", models.OrderState{Status: "ABORTED"})
	b.add(models.ProcObserver, models.State, models.FOrdersSnapshot, "", models.Snapshot{Rows: 1, Complete: true})
	b.add(models.ProcObserver, models.State, models.FKafkaSnapshot, "", models.KafkaSnapshot{Complete: true})
	b.add(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int{"elapsed_ms": 1})
	v := CheckAll(b.history(), trip)
	for _, r := range v.Results {
		switch r.Checker {
		case "compensation-order":
			if r.Status != models.Invalid || r.Violations[0].Kind != "reverse-order" {
				t.Fatalf("compensation-order: %+v", r)
			}
		case "all-or-nothing", "no-double-effect", "pivot", "saga-terminates":
			if r.Status != models.Valid {
				t.Fatalf("%s: %+v", r.Checker, r)
			}
		}
	}
}

func ExampleCheckAll() {
	b := &opsBuilder{}
	b.add("client-1", models.Ok, models.FPlaceOrder, "o-1", models.PlaceOrderReply{Key: "k-1", Order: "o-1"})
	b.add(models.ProcGateway, models.Effect, models.FCharge, "o-1", models.ChargeEffect{Amount: 100, Status: models.ChargeSucceeded})
	b.add(models.ProcGateway, models.Effect, models.FCharge, "o-1", models.ChargeEffect{Amount: 100, Status: models.ChargeSucceeded})
	b.add(models.ProcObserver, models.State, models.FOrderState, "o-1", models.OrderState{Status: models.StatusCancelled})
	v := CheckAll(b.history(), models.OrderSaga)
	for _, r := range v.Results {
		for _, x := range r.Violations {
			fmt.Println(x.Checker, x.Kind, x.Order, x.Ops)
		}
	}
	fmt.Println(v.Status)
	// Output:
	// all-or-nothing kept-charge o-1 [1 2 3]
	// no-double-effect double-charge o-1 [1 2]
	// pivot pivot-not-approved o-1 [1 3]
	// conservation money-mismatch o-1 [1 2 3]
	// invalid
}
