package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// gate is a handler in front of the fake orders API that holds every
// request of a key until release, counting how many are held at once.
type gate struct {
	next    http.Handler
	key     string
	mu      sync.Mutex
	held    int
	maxHeld int
	release chan struct{}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Idempotency-Key") == g.key {
		g.mu.Lock()
		g.held++
		g.maxHeld = max(g.maxHeld, g.held)
		g.mu.Unlock()
		<-g.release
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
	}
	g.next.ServeHTTP(w, r)
}

func (g *gate) waitHeld(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		g.mu.Lock()
		h := g.held
		g.mu.Unlock()
		if h >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never %d requests of %s in flight at once", n, g.key)
}

// A double click (Concurrent) and an in-flight duplicate (DuplicateAfter)
// really are in flight at the same time as the first request, each on its
// own client process so invoke and completion pair up; the fake creates
// one order and answers the others as replays.
func TestConcurrentAndInflightDuplicatesOverlap(t *testing.T) {
	f := &fakeOrders{t: t, seen: map[string]int{}, orders: map[string]string{}, bodies: map[string]string{}}
	g := &gate{next: f, key: "k1", release: make(chan struct{})}
	hs := httptest.NewServer(g)
	t.Cleanup(hs.Close)
	rec := newRecorder(t)
	d := New(rec, hs.URL, WithSpec(orderSpec))
	w := scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{
		plan("k1", 0, func(o *scenarios.SagaPlan) {
			o.Concurrent = 2
			o.DuplicateAfter = scenarios.Duration(50 * time.Millisecond)
		}),
	}}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background(), w) }()
	g.waitHeld(t, 4) // the first, two concurrent copies and the in-flight duplicate
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.requests("k1") != 4 || f.created() != 1 {
		t.Fatalf("%d requests, %d orders; want 4 requests, 1 order", f.requests("k1"), f.created())
	}
	procs := map[string]int{}
	var attempts []int
	open := map[string]bool{}
	for _, op := range rec.Ops() {
		if !strings.HasPrefix(op.Proc, models.ProcClientPfx) {
			t.Fatalf("proc %q is not a client", op.Proc)
		}
		switch op.Type {
		case models.Invoke:
			if open[op.Proc] {
				t.Fatalf("%s has two requests open: invoke/completion pairing broken", op.Proc)
			}
			open[op.Proc] = true
			procs[op.Proc]++
			var v models.StartSaga
			_ = op.Decode(&v)
			attempts = append(attempts, v.Attempt)
		default:
			open[op.Proc] = false
		}
	}
	if len(procs) < 4 {
		t.Fatalf("requests on processes %v: four requests in flight at once need four processes", procs)
	}
	seen := map[int]bool{}
	for _, a := range attempts {
		seen[a] = true
	}
	if len(seen) != 4 || !seen[1] || !seen[4] {
		t.Fatalf("attempt numbers %v, want 1..4 once each", attempts)
	}
	if d.Invoked() != 1 {
		t.Fatalf("Invoked() = %d: races of one order count once", d.Invoked())
	}
}

// A Parallel order does not wait for the client's previous one.
func TestParallelOrderDoesNotWait(t *testing.T) {
	f := &fakeOrders{t: t, seen: map[string]int{}, orders: map[string]string{}, bodies: map[string]string{}}
	g := &gate{next: f, key: "k1", release: make(chan struct{})}
	hs := httptest.NewServer(g)
	t.Cleanup(hs.Close)
	d := New(newRecorder(t), hs.URL, WithSpec(orderSpec))
	w := scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{
		plan("k1", 0),
		plan("k2", 0, func(o *scenarios.SagaPlan) { o.Parallel = true }),
		plan("k3", 0),
	}}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background(), w) }()
	for i := 0; i < 500 && f.requests("k2") == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if f.requests("k2") != 1 || f.requests("k3") != 0 {
		t.Fatalf("with k1 held: k2 sent %d times, k3 %d; want the parallel k2 sent, k3 waiting", f.requests("k2"), f.requests("k3"))
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.created() != 3 {
		t.Fatalf("%d orders created, want 3", f.created())
	}
}

// Retries after an unknown outcome spread over RetrySpread: the k-th retry
// waits k/(1+…+R) of it, so the last one comes about RetrySpread after the
// first failure — long enough for a restarted API to be back.
func TestRetrySpread(t *testing.T) {
	var times []time.Time
	var mu sync.Mutex
	var n atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if n.Add(1) <= 3 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": "restarting"})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"id": "o-1", "status": "PENDING"})
	}))
	t.Cleanup(hs.Close)
	d := New(newRecorder(t), hs.URL, WithSpec(orderSpec))
	o := plan("k1", 0, retryUnknown(3), func(o *scenarios.SagaPlan) { o.RetrySpread = scenarios.Duration(600 * time.Millisecond) })
	if got := d.retryWait(o, 1) + d.retryWait(o, 2) + d.retryWait(o, 3); got != 600*time.Millisecond {
		t.Fatalf("the three waits add up to %v, want the spread", got)
	}
	if err := d.Run(context.Background(), scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{o}}); err != nil {
		t.Fatal(err)
	}
	if len(times) != 4 {
		t.Fatalf("%d requests, want 4", len(times))
	}
	if span := times[3].Sub(times[0]); span < 600*time.Millisecond {
		t.Fatalf("retries spanned %v, want at least the 600ms spread", span)
	}
}
