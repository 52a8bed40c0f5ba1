package nemesis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// TestRequestDrop: the fault waits for its trigger, then requests sent
// through the link leave the caller and never reach the server; its undo
// lets them through again; the journal says what took effect and where.
func TestRequestDrop(t *testing.T) {
	ctx := context.Background()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(204)
	}))
	defer srv.Close()
	l, err := e.NewLink("payment→gateway", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	post := func() error {
		resp, err := client.Post("http://"+l.Listen()+"/charges", "application/json", nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	rec, _ := models.NewRecorder(nil, models.Header{})
	n := &Nemesis{Rec: rec, Env: e}
	c := &counter{}
	heal := make(chan struct{})
	done := make(chan struct{})
	plan := []scenarios.Fault{{ID: "f1", Kind: "request-drop", Target: "payment→gateway", AfterOrders: 2,
		Duration: scenarios.Duration(time.Minute), Params: &faults.RequestDrop{Stream: faults.Upstream}}}
	go func() { n.Run(ctx, plan, c.wait, make(chan struct{}), heal); close(done) }()

	// Before its trigger the link carries requests.
	rec.Record("client-0", models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k-1", Attempt: 1})
	c.set(1)
	if err := post(); err != nil || received.Load() != 1 {
		t.Fatalf("before the trigger: %v, server received %d", err, received.Load())
	}
	if len(FaultJournal(rec.History())) != 0 {
		t.Fatal("the fault applied before its trigger")
	}
	rec.Record("client-0", models.Invoke, models.FPlaceOrder, "", models.PlaceOrder{Key: "k-2", Attempt: 1})
	c.set(2)
	for deadline := time.Now().Add(10 * time.Second); len(FaultJournal(rec.History())) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fault never applied at its trigger")
		}
	}
	// In the window: the request leaves the caller, the server never sees
	// it, the caller is left waiting for its own deadline.
	if err := post(); err == nil {
		t.Fatal("a request through a dropping link was answered")
	}
	if got := received.Load(); got != 1 {
		t.Fatalf("the server received %d requests, want the dropped one lost", got)
	}
	close(heal)
	<-done
	if err := post(); err != nil {
		t.Fatalf("after the undo: %v", err)
	}
	if got := received.Load(); got != 2 {
		t.Fatalf("the server received %d requests after the undo, want 2 (the dropped one never arrives)", got)
	}
	j := FaultJournal(rec.History())
	if len(j) != 2 || j[0].Phase != models.PhaseStart || j[1].Phase != models.PhaseEnd {
		t.Fatalf("journal %+v", j)
	}
	if j[0].Effect != "toxic timeout on upstream" || j[0].Detail["stream"] != "upstream" || j[0].Detail["timeout_ms"] != "0" || j[0].Position != 2 {
		t.Errorf("start %+v", j[0])
	}
	if j[1].Effect != "toxic removed" || j[1].Failed {
		t.Errorf("end %+v", j[1])
	}
}
