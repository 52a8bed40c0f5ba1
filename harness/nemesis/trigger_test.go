package nemesis

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// journal returns the nemesis ops of rec by "id/phase", with their index.
func journal(t *testing.T, rec *models.Recorder) map[string]models.Op {
	t.Helper()
	out := map[string]models.Op{}
	for _, op := range rec.Ops() {
		if op.Proc != models.ProcNemesis {
			continue
		}
		var fr models.FaultRecord
		if err := op.Decode(&fr); err != nil {
			t.Fatal(err)
		}
		out[fr.ID+"/"+fr.Phase] = op
	}
	return out
}

func record(t *testing.T, op models.Op) models.FaultRecord {
	t.Helper()
	var fr models.FaultRecord
	if err := op.Decode(&fr); err != nil {
		t.Fatal(err)
	}
	return fr
}

// waitCalls waits until the fake target saw want calls.
func (f *fakeTarget) waitCalls(t *testing.T, want int) []string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		f.mu.Lock()
		c := slices.Clone(f.calls)
		f.mu.Unlock()
		if len(c) >= want {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Fatalf("target calls %v, want %d", f.calls, want)
	return nil
}

// runPlan starts the nemesis on plan with events fed by rec's subscription.
func runPlan(t *testing.T, rec *models.Recorder, ev *Events, tg *fakeTarget, plan []scenarios.Fault, cs ...*counter) (heal func()) {
	t.Helper()
	cancel := rec.Subscribe(ev.Observe)
	n := &Nemesis{Rec: rec, Target: tg, World: &fakeWorld{}, Events: ev}
	c := &counter{}
	if len(cs) > 0 {
		c = cs[0]
	}
	done, healCh := make(chan struct{}), make(chan struct{})
	finished := make(chan struct{})
	go func() { n.Run(context.Background(), plan, c.wait, done, healCh); close(finished) }()
	return func() {
		close(done)
		close(healCh)
		select {
		case <-finished:
		case <-time.After(20 * time.Second):
			t.Fatal("nemesis did not finish after heal")
		}
		cancel()
	}
}

// An effect trigger waits for the Count-th effect of the provider's action
// whose value matches (replays not counted), applies the fault right after
// it, undoes it when the window ends, and journals which op fired it.
func TestEffectTrigger(t *testing.T) {
	rec, _ := models.NewRecorder(nil, models.Header{})
	tg := &fakeTarget{}
	ev := NewEvents(nil, nil)
	plan := []scenarios.Fault{{ID: "f1", Kind: "pause", Target: "payment", Duration: scenarios.Duration(30 * time.Millisecond),
		Trigger: &scenarios.Trigger{On: scenarios.TriggerEffect, Proc: models.ProcGateway, F: models.FCharge, Count: 2, Match: map[string]string{"status": "declined"}}}}
	heal := runPlan(t, rec, ev, tg, plan)
	rec.Record(models.ProcGateway, models.Effect, models.FCharge, "o-1", models.ChargeEffect{Status: "succeeded"})
	rec.Record(models.ProcGateway, models.Effect, models.FCharge, "o-2", models.ChargeEffect{Status: "declined"})
	rec.Record(models.ProcGateway, models.Effect, models.FCharge, "o-2", models.ChargeEffect{Status: "declined", Replay: true})
	rec.Record(models.ProcCarrier, models.Effect, models.FShipment, "o-1", models.ShipmentEffect{})
	tg.mu.Lock()
	early := len(tg.calls)
	tg.mu.Unlock()
	if early != 0 {
		t.Fatalf("applied before its event: %v", tg.calls)
	}
	second := rec.Record(models.ProcGateway, models.Effect, models.FCharge, "o-3", models.ChargeEffect{Status: "declined"})
	calls := tg.waitCalls(t, 2)
	heal()
	if !slices.Equal(calls, []string{"pause payment", "resume payment"}) {
		t.Fatalf("calls %v, want pause then resume of payment", calls)
	}
	j := journal(t, rec)
	start, end := j["f1/start"], j["f1/end"]
	if start.I <= second.I || end.I <= start.I {
		t.Fatalf("journal: start op %d, end op %d, the firing effect op %d", start.I, end.I, second.I)
	}
	if trig := record(t, start).Detail["trigger"]; !strings.Contains(trig, fmt.Sprintf("op %d", second.I)) {
		t.Fatalf("start detail trigger %q does not name the firing op %d", trig, second.I)
	}
}

// A failpoint trigger counts a point's (or a marker's) lines from the
// named instance, or from any instance of the named process; it can be
// delayed after the event.
func TestFailpointTrigger(t *testing.T) {
	rec, _ := models.NewRecorder(nil, models.Header{})
	tg := &fakeTarget{}
	ev := NewEvents(nil, map[string]string{"relay-1": "relay", "relay-2": "relay", "orders": "orders"})
	plan := []scenarios.Fault{
		{ID: "f1", Kind: "kill", Target: "orders", Duration: scenarios.Duration(20 * time.Millisecond),
			Trigger: &scenarios.Trigger{On: scenarios.TriggerFailpoint, Point: "relay.aggregate-skipped", Component: "relay", Count: 2, Delay: scenarios.Duration(20 * time.Millisecond)}},
	}
	heal := runPlan(t, rec, ev, tg, plan)
	line := func(inst, point string) models.Op {
		return rec.Record(models.ProcComponentPrefix+inst, models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: inst, Failpoint: point, Hit: 1})
	}
	line("orders", "relay.aggregate-skipped") // not a relay
	line("relay-1", "relay.after-select")     // another point
	line("relay-1", "relay.aggregate-skipped")
	second := line("relay-2", "relay.aggregate-skipped")
	calls := tg.waitCalls(t, 2)
	heal()
	if !slices.Equal(calls, []string{"stop orders", "start orders"}) {
		t.Fatalf("calls %v", calls)
	}
	j := journal(t, rec)
	if tr := record(t, j["f1/start"]).Detail["trigger"]; !strings.Contains(tr, fmt.Sprintf("op %d", second.I)) || !strings.Contains(tr, "+20ms") {
		t.Fatalf("trigger detail %q: want the second relay line (op %d) and the delay", tr, second.I)
	}
}

// A record trigger counts records of the type on the topics the process
// consumes, as a tail of the broker reads them; a trigger whose count is
// never reached is journaled as skipped at heal, with how far it got.
func TestRecordTriggerWithATailOfTheBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t-orders", "t-payment"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec, _ := models.NewRecorder(nil, models.Header{})
	tg := &fakeTarget{}
	ev := NewEvents([]models.ConsumerDecl{{Process: "payment", Consumer: "payment", Topics: []string{"t-orders"}, Types: []string{"ChargePayment", "CancelCharge"}}}, nil)
	tail, err := StartTail(c.ListenAddrs(), []string{"t-orders", "t-payment"}, ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	plan := []scenarios.Fault{
		{ID: "f1", Kind: "pause", Target: "payment", Duration: scenarios.Duration(20 * time.Millisecond),
			Trigger: &scenarios.Trigger{On: scenarios.TriggerRecord, Component: "payment", Type: "ChargePayment", Count: 2}},
		{ID: "f2", Kind: "kill", Target: "payment",
			Trigger: &scenarios.Trigger{On: scenarios.TriggerRecord, Component: "payment", Type: "CancelCharge", Count: 1}},
	}
	heal := runPlan(t, rec, ev, tg, plan)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic, typ string) {
		r := &kgo.Record{Topic: topic, Key: []byte("o-1"), Headers: []kgo.RecordHeader{{Key: models.HeaderType, Value: []byte(typ)}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("t-orders", "ChargePayment")
	produce("t-payment", "ChargePayment") // a topic payment does not consume
	produce("t-orders", "ReserveStock")
	time.Sleep(200 * time.Millisecond) // the tail has read them: still one ChargePayment
	tg.mu.Lock()
	early := slices.Clone(tg.calls)
	tg.mu.Unlock()
	if len(early) != 0 {
		t.Fatalf("applied after one ChargePayment of two: %v", early)
	}
	produce("t-orders", "ChargePayment")
	calls := tg.waitCalls(t, 2)
	heal()
	if !slices.Equal(calls, []string{"pause payment", "resume payment"}) {
		t.Fatalf("calls %v", calls)
	}
	j := journal(t, rec)
	if tr := record(t, j["f1/start"]).Detail["trigger"]; !strings.Contains(tr, "t-orders/") {
		t.Fatalf("trigger detail %q does not say where the record was", tr)
	}
	skip := record(t, j["f2/instant"])
	if !strings.HasPrefix(skip.Error, "skipped: healed before its trigger") || !strings.Contains(skip.Error, "0 of 1 events") {
		t.Fatalf("never-reached trigger journaled %q", skip.Error)
	}
}

// Isolate cuts every link of an instance at once and brings each back
// when its window ends; a link another fault holds down stays down until
// that fault ends too.
func TestIsolateCutsEveryLinkAndComposes(t *testing.T) {
	ctx := context.Background()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"orders"}, Topics: []env.Topic{{Name: "orders", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	a, err := e.NewLink("payment→gateway", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.NewLink("payment→mailer", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := models.NewRecorder(nil, models.Header{})
	n := &Nemesis{Rec: rec, Env: e, Target: &fakeTarget{}, World: &fakeWorld{}}
	iso := &faults.Isolate{Links: []string{"payment→gateway", "payment→mailer"}}
	plan := []scenarios.Fault{
		{ID: "f1", Kind: "isolate", Target: "payment", Params: iso, AfterOrders: 1, Duration: scenarios.Duration(300 * time.Millisecond)},
		{ID: "f2", Kind: "link-down", Target: "payment→mailer", AfterOrders: 1, Duration: scenarios.Duration(2 * time.Second)},
	}
	c := &counter{}
	done, heal := make(chan struct{}), make(chan struct{})
	finished := make(chan struct{})
	go func() { n.Run(ctx, plan, c.wait, done, heal); close(finished) }()
	c.set(1)
	for i := 0; i < 500 && (a.Enabled() || b.Enabled()); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if a.Enabled() || b.Enabled() {
		t.Fatal("isolate did not cut both links")
	}
	if _, err := net.DialTimeout("tcp", a.Listen(), time.Second); err == nil {
		t.Error("dial through an isolated link succeeded")
	}
	for i := 0; i < 500 && !a.Enabled(); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if !a.Enabled() {
		t.Fatal("isolate's window ended but payment→gateway is still down")
	}
	j := journal(t, rec)
	if _, ok := j["f2/end"]; !ok && b.Enabled() {
		t.Fatal("payment→mailer came back while link-down f2 still holds it")
	}
	close(done)
	<-finished
	if !b.Enabled() {
		t.Fatal("payment→mailer still down after both faults ended")
	}
	j = journal(t, rec)
	if eff := record(t, j["f1/start"]).Detail["effect"]; !strings.Contains(eff, "payment→gateway down") || !strings.Contains(eff, "payment→mailer") {
		t.Fatalf("isolate journaled %q", eff)
	}
	if eff := record(t, j["f1/end"]).Detail["effect"]; !strings.Contains(eff, "payment→gateway up") {
		t.Fatalf("isolate's undo journaled %q", eff)
	}
}

// An aimed fault whose event has not come by its fallback position starts
// there, and the journal says it fell back and how far its count got.
func TestTriggerFallsBackToAWorkloadPosition(t *testing.T) {
	rec, _ := models.NewRecorder(nil, models.Header{})
	tg := &fakeTarget{}
	ev := NewEvents(nil, nil)
	c := &counter{}
	plan := []scenarios.Fault{{ID: "f1", Kind: "kill", Target: "payment", Duration: scenarios.Duration(10 * time.Millisecond),
		Trigger: &scenarios.Trigger{On: scenarios.TriggerEffect, Proc: models.ProcGateway, F: models.FRefund, Count: 2, Fallback: 5}}}
	heal := runPlan(t, rec, ev, tg, plan, c)
	rec.Record(models.ProcGateway, models.Effect, models.FRefund, "o-1", models.RefundEffect{Status: "succeeded"})
	c.set(4)
	time.Sleep(50 * time.Millisecond)
	tg.mu.Lock()
	early := len(tg.calls)
	tg.mu.Unlock()
	if early != 0 {
		t.Fatal("applied before its event and before its fallback")
	}
	c.set(5)
	tg.waitCalls(t, 2)
	heal()
	tr := record(t, journal(t, rec)["f1/start"]).Detail["trigger"]
	if !strings.Contains(tr, "fell back at 5 orders invoked") || !strings.Contains(tr, "1 of 2 events") {
		t.Fatalf("trigger detail %q", tr)
	}
}
