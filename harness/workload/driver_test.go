package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

var orderSpec = *targets.OrderDomain().Workload

func newRecorder(t *testing.T) *models.Recorder {
	t.Helper()
	rec, err := models.NewRecorder(nil, models.Header{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func plan(key string, client int, mods ...func(*scenarios.SagaPlan)) scenarios.SagaPlan {
	body := `{"customer":"c-` + key + `","items":[{"sku":"sku-1","qty":2}],"card":"tok_visa","total":2500}`
	o := scenarios.SagaPlan{Key: key, Body: json.RawMessage(body), Client: client}
	for _, m := range mods {
		m(&o)
	}
	return o
}

func submissions(n int) func(*scenarios.SagaPlan) {
	return func(o *scenarios.SagaPlan) { o.Submissions = n }
}
func retryUnknown(n int) func(*scenarios.SagaPlan) {
	return func(o *scenarios.SagaPlan) { o.RetryUnknown = n }
}

// render writes each client op as one comparable line and checks the
// invariants every client op must hold whatever the test.
func render(t *testing.T, ops []models.Op) []string {
	t.Helper()
	var out []string
	for _, op := range ops {
		if op.F != models.FPlaceOrder {
			t.Fatalf("op %v: f %q, want %q", op, op.F, models.FPlaceOrder)
		}
		switch op.Type {
		case models.Invoke:
			var v models.StartSaga
			if err := op.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if string(v.Body) != `{"customer":"c-`+v.Key+`","items":[{"sku":"sku-1","qty":2}],"card":"tok_visa","total":2500}` {
				t.Fatalf("op %v: invoke value does not carry the request", op)
			}
			out = append(out, fmt.Sprintf("%s invoke %s #%d", op.Proc, v.Key, v.Attempt))
		case models.Ok:
			var v models.PlaceOrderReply
			if err := op.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if op.Order != v.Order || v.Order == "" {
				t.Fatalf("op %v: Order on the op %q, in the value %q", op, op.Order, v.Order)
			}
			out = append(out, fmt.Sprintf("%s ok %s %s %d replayed=%v", op.Proc, v.Key, v.Order, v.Status, v.Replayed))
		case models.Fail, models.Info:
			var v models.ClientFailure
			if err := op.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if v.Error == "" || op.Order != "" {
				t.Fatalf("op %v: a %s needs an error and no order", op, op.Type)
			}
			out = append(out, fmt.Sprintf("%s %s %s %d %s", op.Proc, op.Type, v.Key, v.Status, v.Code))
		default:
			t.Fatalf("op %v: unexpected type", op)
		}
	}
	return out
}

func TestOutcomesAreRecordedHonestly(t *testing.T) {
	cases := []struct {
		name   string
		script []string
		mods   []func(*scenarios.SagaPlan)
		want   []string
		// requests the server must have seen: every send is an attempt in
		// the history, none hidden by the HTTP client.
		requests int
		created  bool
	}{
		{"accepted", nil, nil, []string{
			"client-0 invoke k #1",
			"client-0 ok k o-1 202 replayed=false",
		}, 1, true},
		{"double submission replays", nil, []func(*scenarios.SagaPlan){submissions(3)}, []string{
			"client-0 invoke k #1",
			"client-0 ok k o-1 202 replayed=false",
			"client-0 invoke k #2",
			"client-0 ok k o-1 202 replayed=true",
			"client-0 invoke k #3",
			"client-0 ok k o-1 202 replayed=true",
		}, 3, true},
		{"definite refusal is fail", []string{bBadRequest}, []func(*scenarios.SagaPlan){retryUnknown(3)}, []string{
			"client-0 invoke k #1",
			"client-0 fail k 400 bad_request",
		}, 1, false},
		{"503 with a code is still unknown", []string{bUnavailable}, nil, []string{
			"client-0 invoke k #1",
			"client-0 info k 503 unavailable",
		}, 1, false},
		{"500 after commit, retried", []string{b500Created}, []func(*scenarios.SagaPlan){retryUnknown(1)}, []string{
			"client-0 invoke k #1",
			"client-0 info k 500 internal",
			"client-0 invoke k #2",
			"client-0 ok k o-1 202 replayed=true",
		}, 2, true},
		{"resets then success", []string{bResetBefore, bResetAfter}, []func(*scenarios.SagaPlan){retryUnknown(2)}, []string{
			"client-0 invoke k #1",
			"client-0 info k 0 ",
			"client-0 invoke k #2",
			"client-0 info k 0 ",
			"client-0 invoke k #3",
			"client-0 ok k o-1 202 replayed=true",
		}, 3, true},
		{"retries run out", []string{bResetBefore, bResetBefore, bResetBefore}, []func(*scenarios.SagaPlan){retryUnknown(1)}, []string{
			"client-0 invoke k #1",
			"client-0 info k 0 ",
			"client-0 invoke k #2",
			"client-0 info k 0 ",
		}, 2, false},
		{"timeout after commit is unknown", []string{bHangCreated}, nil, []string{
			"client-0 invoke k #1",
			"client-0 info k 0 ",
		}, 1, true},
		{"4xx without a code is unknown", []string{bProxy404}, nil, []string{
			"client-0 invoke k #1",
			"client-0 info k 404 ",
		}, 1, false},
		{"2xx without an id is unknown", []string{b2xxNoID}, nil, []string{
			"client-0 invoke k #1",
			"client-0 info k 200 ",
		}, 1, false},
		{"each submission has its own retries", []string{bResetBefore, bOK, bResetBefore}, []func(*scenarios.SagaPlan){submissions(2), retryUnknown(1)}, []string{
			"client-0 invoke k #1",
			"client-0 info k 0 ",
			"client-0 invoke k #2",
			"client-0 ok k o-1 202 replayed=false",
			"client-0 invoke k #3",
			"client-0 info k 0 ",
			"client-0 invoke k #4",
			"client-0 ok k o-1 202 replayed=true",
		}, 4, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, hs := newFakeOrders(t, map[string][]string{"k": c.script})
			rec := newRecorder(t)
			d := New(rec, hs.URL, WithSpec(orderSpec), WithTimeout(300*time.Millisecond), WithRetryBackoff(time.Millisecond))
			w := scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{plan("k", 0, c.mods...)}}
			if err := d.Run(context.Background(), w); err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := render(t, rec.Ops())
			if !slices.Equal(got, c.want) {
				t.Fatalf("ops:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			if n := srv.requests("k"); n != c.requests {
				t.Errorf("server saw %d requests, want %d", n, c.requests)
			}
			if got := srv.created() == 1; got != c.created {
				t.Errorf("order created = %v, want %v", got, c.created)
			}
			if d.Invoked() != 1 {
				t.Errorf("Invoked() = %d, want 1: retries and resubmissions are not new orders", d.Invoked())
			}
		})
	}
}

// The unknown outcomes say why, so a reader of the history can tell a
// client timeout from a reset.
func TestInfoNamesTheCause(t *testing.T) {
	_, hs := newFakeOrders(t, map[string][]string{"hang": {bHangCreated}, "reset": {bResetAfter}})
	rec := newRecorder(t)
	d := New(rec, hs.URL, WithSpec(orderSpec), WithTimeout(200*time.Millisecond))
	w := scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{plan("hang", 0), plan("reset", 0)}}
	if err := d.Run(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	ops := rec.Ops()
	var hang, rst models.ClientFailure
	ops[1].Decode(&hang)
	ops[3].Decode(&rst)
	if !strings.Contains(hang.Error, "client timeout") {
		t.Errorf("timeout info says %q, want it to name the client timeout", hang.Error)
	}
	if !strings.Contains(rst.Error, "EOF") && !strings.Contains(rst.Error, "reset") {
		t.Errorf("reset info says %q, want it to name the dropped connection", rst.Error)
	}
}

func TestClientsPlaceTheirOrdersInPlanOrder(t *testing.T) {
	srv, hs := newFakeOrders(t, nil)
	rec := newRecorder(t)
	var (
		mu   sync.Mutex
		seen []int64
	)
	d := New(rec, hs.URL, WithSpec(orderSpec), OnInvoke(func(n int64) {
		// The hook runs after the invoke op is in the history, so a fault
		// triggered on it lands after the n-th order's invoke.
		invokes := 0
		for _, op := range rec.Ops() {
			if op.Type == models.Invoke {
				invokes++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if int64(invokes) < n {
			t.Errorf("hook for order %d ran with %d invokes recorded", n, invokes)
		}
		seen = append(seen, n)
	}))
	const clients, orders = 3, 30
	var w scenarios.Workload
	w.Clients = clients
	for i := range orders {
		o := plan(fmt.Sprintf("k%02d", i), i%clients)
		if i%7 == 0 {
			o.Gap = scenarios.Duration(time.Millisecond)
		}
		w.Sagas = append(w.Sagas, o)
	}
	early := d.Subscribe(10)
	never := d.Subscribe(orders + 1)
	if err := d.Run(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if d.Invoked() != orders || srv.created() != orders {
		t.Fatalf("invoked %d, created %d, want %d", d.Invoked(), srv.created(), orders)
	}
	select {
	case <-early:
	default:
		t.Error("Subscribe(10) not closed after 30 orders")
	}
	select {
	case <-never:
		t.Error("Subscribe(31) closed after only 30 orders")
	default:
	}
	select {
	case <-d.Subscribe(orders):
	default:
		t.Error("Subscribe on a reached count must return a closed channel")
	}
	slices.Sort(seen)
	for i, n := range seen {
		if n != int64(i+1) {
			t.Fatalf("OnInvoke counts %v, want 1..%d", seen, orders)
		}
	}
	// Per client: invoke, ok, invoke, ok … in plan order.
	perClient := map[string][]string{}
	for _, line := range render(t, rec.Ops()) {
		f := strings.Fields(line)
		perClient[f[0]] = append(perClient[f[0]], f[1]+" "+f[2])
	}
	for c := range clients {
		proc := fmt.Sprintf("client-%d", c)
		var want []string
		for i := c; i < orders; i += clients {
			k := fmt.Sprintf("k%02d", i)
			want = append(want, "invoke "+k, "ok "+k)
		}
		if !slices.Equal(perClient[proc], want) {
			t.Errorf("%s ops %v, want %v", proc, perClient[proc], want)
		}
	}
}

func TestCancelMidRequestIsUnknown(t *testing.T) {
	script := map[string][]string{}
	var w scenarios.Workload
	w.Clients = 2
	for i := range 6 {
		k := fmt.Sprintf("k%d", i)
		script[k] = []string{bHangCreated}
		w.Sagas = append(w.Sagas, plan(k, i%2, retryUnknown(5)))
	}
	_, hs := newFakeOrders(t, script)
	rec := newRecorder(t)
	d := New(rec, hs.URL, WithSpec(orderSpec), WithTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-d.Subscribe(2) // both clients are in a request that will never end
		cancel()
	}()
	err := d.Run(ctx, w)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	got := render(t, rec.Ops())
	slices.Sort(got)
	want := []string{"client-0 info k0 0 ", "client-0 invoke k0 #1", "client-1 info k1 0 ", "client-1 invoke k1 #1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ops %q, want %q (no retry and no new order after the cancel)", got, want)
	}
	for _, op := range rec.Ops() {
		var v models.ClientFailure
		if op.Type == models.Info {
			op.Decode(&v)
			if !strings.Contains(v.Error, "interrupted") {
				t.Errorf("info %q does not say the run was interrupted", v.Error)
			}
		}
	}
}

func TestRunRejectsAnOrderForAMissingClient(t *testing.T) {
	rec := newRecorder(t)
	d := New(rec, "http://127.0.0.1:1", WithSpec(orderSpec))
	err := d.Run(context.Background(), scenarios.Workload{Clients: 2, Sagas: []scenarios.SagaPlan{plan("k", 2)}})
	if err == nil || !strings.Contains(err.Error(), `saga "k" is for client 2`) {
		t.Fatalf("err = %v", err)
	}
	if rec.Len() != 0 {
		t.Fatalf("recorded %d ops for a rejected workload", rec.Len())
	}
}

// A target that is down answers nothing: every attempt is unknown, the run
// still ends.
func TestTargetDown(t *testing.T) {
	rec := newRecorder(t)
	d := New(rec, "http://127.0.0.1:1", WithSpec(orderSpec), WithRetryBackoff(time.Millisecond))
	w := scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{plan("k", 0, retryUnknown(1))}}
	if err := d.Run(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	want := []string{"client-0 invoke k #1", "client-0 info k 0 ", "client-0 invoke k #2", "client-0 info k 0 "}
	if got := render(t, rec.Ops()); !slices.Equal(got, want) {
		t.Fatalf("ops %q, want %q", got, want)
	}
}

// BenchmarkRun measures the driver's own cost per order against an
// in-process peer: b.N orders over 8 clients.
func BenchmarkRun(b *testing.B) {
	_, hs := newFakeOrders(b, nil)
	rec, _ := models.NewRecorder(io.Discard, models.Header{})
	w := scenarios.Workload{Clients: 8}
	for i := range b.N {
		w.Sagas = append(w.Sagas, plan(fmt.Sprintf("k%d", i), i%8))
	}
	d := New(rec, hs.URL, WithSpec(orderSpec), WithLogger(slog.New(slog.DiscardHandler)))
	b.ResetTimer()
	if err := d.Run(context.Background(), w); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}
