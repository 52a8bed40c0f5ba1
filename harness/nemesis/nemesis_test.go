package nemesis

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// fakeTarget records process control calls; the nemesis's contract with
// the target is only these calls (real processes are covered by the
// target stage's and the CLI's tests).
type fakeTarget struct {
	mu    sync.Mutex
	calls []string
	armed map[string]string
}

func (f *fakeTarget) note(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeTarget) Stop(_ context.Context, n, id string) (string, error) {
	f.note("stop " + n)
	return "killed", nil
}
func (f *fakeTarget) Start(_ context.Context, n, id string) (string, error) {
	f.note("start " + n)
	return "restarted", nil
}
func (f *fakeTarget) Pause(n, id string) (string, error) { f.note("pause " + n); return "paused", nil }
func (f *fakeTarget) Resume(n, id string) (string, error) {
	f.note("resume " + n)
	return "resumed", nil
}
func (f *fakeTarget) Armed(id string) (string, bool) {
	in, ok := f.armed[id]
	return in, ok
}
func (f *fakeTarget) Groups(instance string) ([]string, []string, error) {
	if instance == "relay-1" {
		return nil, []string{"relay-1", "relay-2"}, nil
	}
	return []string{instance}, []string{instance}, nil
}

type fakeWorld struct {
	target, mode string
	n            int
}

func (g *fakeWorld) InjectAmbiguous(target, mode string, n int) error {
	g.target, g.mode, g.n = target, mode, n
	return nil
}
func (g *fakeWorld) AmbiguousActions() []string { return []string{"gateway/charge"} }

// trigger fires once n orders are "invoked" by the test.
type counter struct {
	mu      sync.Mutex
	n       int
	waiters map[int]chan struct{}
}

func (c *counter) wait(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n >= n {
		close(ch)
		return ch
	}
	if c.waiters == nil {
		c.waiters = map[int]chan struct{}{}
	}
	if w, ok := c.waiters[n]; ok {
		return w
	}
	c.waiters[n] = ch
	return ch
}

func (c *counter) set(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = n
	for k, ch := range c.waiters {
		if k <= n {
			close(ch)
			delete(c.waiters, k)
		}
	}
}

func TestNemesisAppliesAndJournals(t *testing.T) {
	ctx := context.Background()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"orders"}, Topics: []env.Topic{{Name: "orders", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	link, err := e.NewLink("payment→gateway", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := models.NewRecorder(nil, models.Header{})
	comps := &fakeTarget{armed: map[string]string{"f7": "relay-1"}}
	gw := &fakeWorld{}
	n := &Nemesis{Rec: rec, Env: e, Target: comps, World: gw}
	faults := []scenarios.Fault{
		{ID: "f1", Kind: "link-down", Target: "payment→gateway", AfterOrders: 2, Duration: scenarios.Duration(400 * time.Millisecond)},
		{ID: "f2", Kind: "kill", Target: "relay-1", AfterOrders: 1, Duration: scenarios.Duration(50 * time.Millisecond)},
		{ID: "f3", Kind: "kafka-produce-err", AfterOrders: 0, Params: &faults.KafkaProduceErr{Count: 2}, Duration: scenarios.Duration(50 * time.Millisecond)},
		{ID: "f4", Kind: "gateway-ambiguous", AfterOrders: 0, Params: &faults.GatewayAmbiguous{Mode: "hang", Count: 3}},
		{ID: "f5", Kind: "pause", Target: "payment", AfterOrders: 99, Duration: scenarios.Duration(time.Second)},
		{ID: "f6", Kind: "latency", Target: "no→such", AfterOrders: 0},
		{ID: "f7", Kind: "failpoint", Target: "relay.after-publish", Params: &faults.Failpoint{Component: "relay-1", Action: "crash", Hit: 3}},
	}
	c := &counter{}
	done, heal := make(chan struct{}), make(chan struct{})
	finished := make(chan struct{})
	go func() { n.Run(ctx, faults, c.wait, done, heal); close(finished) }()

	c.set(2)
	// The link-down window is open: a connection through the link fails.
	deadline := time.Now().Add(5 * time.Second)
	for link.Enabled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if link.Enabled() {
		t.Fatal("link-down never took the link down")
	}
	if _, err := net.DialTimeout("tcp", link.Listen(), time.Second); err == nil {
		t.Error("dial through a downed link succeeded")
	}
	close(done) // the workload ends at 2 orders: f5 (after 99) must be skipped
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("nemesis did not finish")
	}
	if !link.Enabled() {
		t.Error("link still down after its window")
	}
	if gw.mode != "hang" || gw.n != 3 {
		t.Errorf("world ambiguity = %q×%d, want hang×3", gw.mode, gw.n)
	}
	if gw.target != "gateway/charge" {
		t.Errorf("world ambiguity aimed at %q, want gateway/charge (an older plan names no action: the first that declares ambiguity)", gw.target)
	}
	if len(comps.calls) != 2 || comps.calls[0] != "stop relay-1" || comps.calls[1] != "start relay-1" {
		t.Errorf("component calls %v, want stop then start of relay-1", comps.calls)
	}
	got := map[string]models.FaultRecord{}
	for _, op := range rec.Ops() {
		var fr models.FaultRecord
		if err := op.Decode(&fr); err != nil || op.Proc != models.ProcNemesis || op.F != fr.Kind {
			t.Fatalf("bad nemesis op %v", op)
		}
		got[fr.ID+"/"+fr.Phase] = fr
	}
	for _, want := range []string{"f1/start", "f1/end", "f2/start", "f2/end", "f3/start", "f3/end", "f4/instant", "f5/instant", "f6/instant", "f7/instant"} {
		if _, ok := got[want]; !ok {
			t.Errorf("journal lacks %s; has %v", want, got)
		}
	}
	if fr := got["f5/instant"]; fr.Error == "" {
		t.Error("a fault whose trigger was never reached is journaled without saying it was skipped")
	}
	if fr := got["f6/instant"]; fr.Error == "" {
		t.Error("a fault on an unknown link is journaled as applied")
	}
	if fr := got["f1/start"]; fr.Error != "" {
		t.Errorf("link-down failed: %s", fr.Error)
	}
}
