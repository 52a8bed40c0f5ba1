package explore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// sagaHistory is a small run: payment is killed while one saga waits for
// it at ChargePayment and another, already charged, is past it; a relay
// point is reached during the kill (a fault on another component) and a
// payment point right after payment's restart.
func sagaHistory(t *testing.T) *models.History {
	t.Helper()
	rec, _ := models.NewRecorder(nil, models.Header{})
	start := rec.Start().UnixNano()
	at := func(d time.Duration) { time.Sleep(time.Until(rec.Start().Add(d))) }
	rec.Record(models.ProcHarness, models.Info, models.FTarget, "", models.TargetDecl{
		Instances: []string{"orders", "payment", "relay-1"}, Relays: []string{"relay-1"},
		Consumers: []models.ConsumerDecl{
			{Process: "payment", Consumer: "payment", Topics: []string{"orders"}, Types: []string{"ChargePayment"}},
			{Process: "orders", Consumer: "orders", Topics: []string{"payment"}, Types: []string{"PaymentCharged"}},
		}})
	ev := func(order, typ, source string, d time.Duration) {
		rec.Record(models.ProcObserver, models.Event, typ, order, models.EventRecord{Topic: "t", Source: source, Timestamp: start + int64(d)})
	}
	at(10 * time.Millisecond)
	rec.Record(models.ProcNemesis, models.Info, "kill", "", models.FaultRecord{ID: "f1", Kind: "kill", Phase: models.PhaseStart, Target: "payment", Detail: map[string]string{"effect": "killed"}})
	at(30 * time.Millisecond)
	rec.Record("component/relay-1", models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: "relay-1", Failpoint: "relay.after-select", Hit: 1})
	at(60 * time.Millisecond)
	rec.Record(models.ProcNemesis, models.Info, "kill", "", models.FaultRecord{ID: "f1", Kind: "kill", Phase: models.PhaseEnd, Target: "payment", Detail: map[string]string{"effect": "restarted"}})
	at(70 * time.Millisecond)
	rec.Record("component/payment", models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: "payment", Failpoint: "payment.after-charge", Hit: 1})
	// o-1 waits at ChargePayment through the kill; o-2 is charged before
	// it and approved during it.
	ev("o-1", "OrderCreated", "orders", 1*time.Millisecond)
	ev("o-1", "ChargePayment", "orders", 5*time.Millisecond)
	ev("o-1", "PaymentCharged", "payment", 80*time.Millisecond)
	ev("o-2", "ChargePayment", "orders", 2*time.Millisecond)
	ev("o-2", "PaymentCharged", "payment", 4*time.Millisecond)
	ev("o-2", "OrderApproved", "orders", 40*time.Millisecond)
	rec.Record(models.ProcObserver, models.State, models.FOrderState, "o-1", models.OrderState{Status: "APPROVED", Trail: []string{"create-order", "charge", "approve"}})
	rec.Record(models.ProcObserver, models.State, models.FOrderState, "o-2", models.OrderState{Status: "APPROVED", Trail: []string{"charge", "approve"}})
	// A marker orders logs 3 s after the kill ended (a step timing out
	// on the saga payment held up): within the branch wake, not the 1 s
	// one; another 10 s later, outside both.
	rec.Record("component/orders", models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: "orders", Failpoint: "orders.timeout.charging", Hit: 1})
	rec.Record("component/orders", models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: "orders", Failpoint: "orders.timeout.delivering", Hit: 1})
	h := rec.History()
	h.Header.Started = rec.Start().UTC().Format(time.RFC3339Nano)
	for i := range h.Ops {
		var ev models.FailpointEvent
		if h.Ops[i].F != models.FFailpoint || h.Ops[i].Decode(&ev) != nil {
			continue
		}
		switch ev.Failpoint {
		case "orders.timeout.charging":
			h.Ops[i].T = int64(60*time.Millisecond + 3*time.Second)
		case "orders.timeout.delivering":
			h.Ops[i].T = int64(60*time.Millisecond + 13*time.Second)
		}
	}
	return h
}

func TestSignatureOfASagaUnderAKill(t *testing.T) {
	sig := Compute(sagaHistory(t))
	has := func(f string) bool { return slices.Contains(sig, f) }
	for _, want := range []string{
		"point relay.after-select",
		"point payment.after-charge",
		// Right after payment's restart: within the kill's wake.
		"point-under payment.after-charge | kill",
		// relay-1 took a point while payment was down: another
		// component's fault.
		"point-during relay.after-select | kill@payment",
		"point-during orders.timeout.charging | kill@payment",
		// o-1 sat at ChargePayment, waiting on payment, during the kill.
		"step kill@payment | ChargePayment",
		// The reply payment wrote after its restart is under the kill's
		// wake; payment is its source.
		"transition-under ChargePayment→PaymentCharged | kill@payment",
		"trail create-order,charge,approve",
		"trail-under create-order,charge,approve | kill",
	} {
		if !has(want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, not := range []string{
		// relay-1 was not the killed component.
		"point-under relay.after-select | kill",
		// payment's own point is under its kill, not during another's.
		"point-during payment.after-charge | kill@payment",
		// Past the wake.
		"point-during orders.timeout.delivering | kill@payment",
		// o-2's approval during the kill was orders' doing, not payment's.
		"transition-under PaymentCharged→OrderApproved | kill@payment",
		"step kill@payment | PaymentCharged",
		"trail-under charge,approve | kill",
	} {
		if has(not) {
			t.Errorf("has %q", not)
		}
	}
	if t.Failed() {
		t.Logf("signature:\n%s", strings.Join(sig, "\n"))
	}
}

func TestCoverageCountsFirstReaches(t *testing.T) {
	c := NewCoverage()
	if got := c.Add(Signature{"a x", "b y"}); len(got) != 2 {
		t.Fatalf("first add: %v", got)
	}
	if got := c.Add(Signature{"a x", "c z"}); !slices.Equal(got, []string{"c z"}) {
		t.Fatalf("second add: %v", got)
	}
	if c.Len() != 3 || c.Hits("a x") != 2 || c.ByCategory()["a"] != 1 || !slices.Equal(c.Rare(), []string{"b y", "c z"}) {
		t.Errorf("coverage %d, hits %d, by category %v, rare %v", c.Len(), c.Hits("a x"), c.ByCategory(), c.Rare())
	}
}
