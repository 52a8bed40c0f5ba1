package nemesis

import (
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// sagaRun records a run in which a kill of payment starts while one saga
// waits at ChargePayment and ends after its reply; a failpoint fires in
// orders and the component is back 20 ms later. at shifts the kill. Each
// op's time is set, not slept for: a sleep on a loaded machine overshoots
// and moved the kill past the saga's reply.
func sagaRun(t *testing.T, killAt time.Duration) *models.History {
	t.Helper()
	rec, _ := models.NewRecorder(nil, models.Header{})
	start := rec.Start().UnixNano()
	var times []time.Duration // the time of each op, by index
	at := func(d time.Duration, proc string, typ models.OpType, f, order string, v any) {
		rec.Record(proc, typ, f, order, v)
		times = append(times, d)
	}
	at(0, models.ProcHarness, models.Info, models.FTarget, "", models.TargetDecl{Instances: []string{"orders", "payment"}})
	at(0, models.ProcNemesis, models.Info, "failpoint", "", fr("f2", "failpoint", models.PhaseInstant, "orders.after-email", map[string]string{"effect": "armed", "armed": "orders"}))
	at(killAt, models.ProcNemesis, models.Info, "kill", "", fr("f1", "kill", models.PhaseStart, "payment", map[string]string{"effect": "killed", "trigger": "ChargePayment record #1 for payment at orders/0@3"}))
	at(killAt+20*time.Millisecond, models.ProcNemesis, models.Info, "kill", "", fr("f1", "kill", models.PhaseEnd, "payment", map[string]string{"effect": "restarted"}))
	at(killAt+30*time.Millisecond, models.ProcNemesis, models.Info, "failpoint", "", fr("f2", "failpoint", models.PhaseFired, "orders.after-email", map[string]string{"effect": "fired", "instance": "orders", "hit": "1"}))
	at(killAt+30*time.Millisecond, models.ProcNemesis, models.Info, "crash", "", fr("crash1", "crash", models.PhaseInstant, "orders", map[string]string{"fired": "f2"}))
	at(killAt+50*time.Millisecond, models.ProcNemesis, models.Info, "restart", "", fr("crash1", "restart", models.PhaseInstant, "orders", nil))
	ev := func(order, typ string, d time.Duration) {
		at(killAt+50*time.Millisecond, models.ProcObserver, models.Event, typ, order, models.EventRecord{Topic: "orders", Timestamp: start + int64(d)})
	}
	ev("o-1", "OrderCreated", 1*time.Millisecond)
	ev("o-1", "ChargePayment", 5*time.Millisecond)
	ev("o-1", "PaymentCharged", 35*time.Millisecond)
	ev("o-1", "OrderApproved", 200*time.Millisecond)
	h := rec.History()
	for i := range h.Ops {
		h.Ops[i].T = int64(times[i])
	}
	h.Header.Started = rec.Start().UTC().Format(time.RFC3339Nano)
	return h
}

func TestWindowsAndHits(t *testing.T) {
	h := sagaRun(t, 10*time.Millisecond)
	ws := Windows(h)
	if len(ws) != 2 || ws[0].ID != "f1" || ws[1].ID != "f2" {
		t.Fatalf("windows %+v", ws)
	}
	if got := ws[0].Components; len(got) != 1 || got[0] != "payment" {
		t.Errorf("kill acts on %v", got)
	}
	if d := time.Duration(ws[1].To - ws[1].From); d < 15*time.Millisecond {
		t.Errorf("the failpoint crash lasted %v: it should last until orders restarted", d)
	}
	if ws[0].Trigger == "" {
		t.Error("the kill's trigger was not read")
	}
	hits := Hits(h)
	if got := hits[0].Steps(); got != "1 ChargePayment" {
		t.Errorf("the kill met %q", got)
	}
	if got := hits[1].Steps(); got != "1 PaymentCharged" {
		t.Errorf("the crash met %q", got)
	}
}

// TestCompareRunsSaysWhereTheSagasWere: the same plan replayed with the
// kill landing after the saga's reply took the same effect at the same
// triggering event, but met the saga at another step.
func TestCompareRunsSaysWhereTheSagasWere(t *testing.T) {
	a, b := sagaRun(t, 10*time.Millisecond), sagaRun(t, 60*time.Millisecond)
	f := CompareRuns(a, a)
	if f.SameSteps != 2 || f.SameEffect != 2 || f.SamePlace != 2 {
		t.Fatalf("a run against itself: %+v", f)
	}
	f = CompareRuns(a, b)
	if f.SameEffect != 2 || f.SamePlace != 2 || f.SameSteps != 1 {
		t.Fatalf("fidelity %+v", f)
	}
	if got := f.Line(); got != "replay fidelity: 2/2 faults took the same effect, 2/2 at the same workload position or triggering event, 1/2 met the sagas at the same steps" {
		t.Errorf("line %q", got)
	}
	if len(f.StepsDiffer) != 1 || !strings.HasPrefix(f.StepsDiffer[0], "f1 kill payment: met 1 ChargePayment; replay met 1 PaymentCharged") {
		t.Errorf("steps differ %q", f.StepsDiffer)
	}
}

func TestSameStepsIgnoresTimingNoise(t *testing.T) {
	hit := func(ms ...string) Hit {
		h := Hit{Moments: map[string]int{}}
		for _, m := range ms {
			h.Moments[m]++
		}
		return h
	}
	for _, c := range []struct {
		a, b Hit
		want bool
	}{
		{hit(), hit(), true},
		{hit("ChargePayment"), hit("ChargePayment", "ChargePayment"), true}, // counts are timing
		{hit("ChargePayment", "StockReserved"), hit("ChargePayment"), true}, // 1 of 2
		{hit("ChargePayment", "StockReserved", "placed"), hit("ChargePayment", "StockReserved", "PaymentCharged"), true},
		{hit("ChargePayment"), hit("PaymentCharged"), false},
		{hit("ChargePayment"), hit(), false},
		{hit("ChargePayment", "StockReserved", "placed"), hit("ChargePayment", "PaymentCharged", "DeliveryScheduled"), false}, // 1 of 5
	} {
		if got := sameSteps(c.a, c.b); got != c.want || sameSteps(c.b, c.a) != c.want {
			t.Errorf("sameSteps(%s | %s) = %v, want %v (both ways)", c.a.Steps(), c.b.Steps(), got, c.want)
		}
	}
}

// TestBrokerFaultsThatHitTookEffect: a fault armed for its window (a
// broker error on the next requests) took effect when its undo counted
// hits, and not when it counted none.
func TestBrokerFaultsThatHitTookEffect(t *testing.T) {
	h := history(t, "o",
		fr("f1", "kafka-produce-err", models.PhaseStart, "", map[string]string{"effect": "armed"}), "o",
		fr("f1", "kafka-produce-err", models.PhaseEnd, "", map[string]string{"hits": "2"}),
		fr("f2", "kafka-commit-err", models.PhaseStart, "", map[string]string{"effect": "armed"}),
		fr("f2", "kafka-commit-err", models.PhaseEnd, "", map[string]string{"hits": "0"}))
	var got []string
	for _, o := range Outcomes(FaultJournal(h)) {
		got = append(got, o.ID+": "+o.String())
	}
	if g := strings.Join(got, "|"); g != "f1: armed, hit 2 times at order 1|f2: armed, never fired" {
		t.Errorf("outcomes %s", g)
	}
	if ws := Windows(h); len(ws) != 1 || ws[0].ID != "f1" {
		t.Errorf("windows %+v", ws)
	}
}
