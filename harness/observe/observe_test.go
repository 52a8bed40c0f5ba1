package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

var quiet = slog.New(slog.DiscardHandler)

// One PostgreSQL for the package: initdb costs a second or two.
var (
	pgOnce sync.Once
	pgEnv  *env.Env
	pgErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pgEnv != nil {
		if err := pgEnv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close env:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func postgres(t *testing.T) *env.Env {
	t.Helper()
	pgOnce.Do(func() {
		pgEnv, pgErr = env.Up(context.Background(), env.Config{Databases: []string{"orders", "inventory"}})
	})
	if pgErr != nil {
		t.Fatalf("PostgreSQL for the observer tests: %v (needs the PostgreSQL 15 server binaries: apt-get install postgresql-15)", pgErr)
	}
	return pgEnv
}

func exec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// apiOrder is one element of the order domain's GET /orders.
type apiOrder struct {
	ID             string        `json:"id"`
	Status         string        `json:"status"`
	IdempotencyKey string        `json:"idempotency_key,omitempty"`
	Customer       string        `json:"customer,omitempty"`
	Items          []models.Item `json:"items,omitempty"`
	Card           string        `json:"card,omitempty"`
	Total          int64         `json:"total,omitempty"`
	Trail          []string      `json:"trail,omitempty"`
}

var orderDomain = targets.OrderDomain()

// ordersAPI serves GET /orders from a function of the request count.
func ordersAPI(t *testing.T, list func(n int) []apiOrder) *httptest.Server {
	var (
		mu sync.Mutex
		n  int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/orders" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		n++
		l := list(n)
		mu.Unlock()
		json.NewEncoder(w).Encode(l)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// line renders an op as "type f order value" for exact comparison; error
// text from outside (PostgreSQL) is checked with want and replaced by ERR.
func line(op models.Op) string {
	return fmt.Sprintf("%s %s %s %s", op.Type, op.F, op.Order, op.Value)
}

var errField = regexp.MustCompile(`"error":"(?:[^"\\]|\\.)*"`)

var (
	tsField    = regexp.MustCompile(`"timestamp_ns":[0-9]+`)
	timeField  = regexp.MustCompile(`_t":[0-9]+`)
	pollsField = regexp.MustCompile(`"polls":[0-9]+`)
)

func TestObserveRecordsEverySourceInOrder(t *testing.T) {
	e := postgres(t)
	exec(t, e.DirectDSN("orders"),
		`DROP TABLE IF EXISTS outbox`,
		`CREATE TABLE outbox (id bigserial PRIMARY KEY, event_id text, aggregate_id text, seq bigint, type text, topic text, published bool)`,
		`INSERT INTO outbox (event_id, aggregate_id, seq, type, topic, published) VALUES
		   ('e-1', 'o-1', 1, 'OrderCreated', 'orders.events', true),
		   ('e-2', 'o-1', 2, 'OrderCancelled', 'orders.events', false)`)
	exec(t, e.DirectDSN("inventory"),
		`DROP TABLE IF EXISTS stock, processed`,
		`CREATE TABLE stock (sku text, available bigint, reserved int)`, // int: a target's own column types are accepted
		`INSERT INTO stock VALUES ('sku-2', 0, 0), ('sku-1', 8, 2)`,
		`CREATE TABLE processed (consumer text, event_id text, aggregate_id text, source text, type text, seq bigint, position bigserial)`,
		`INSERT INTO processed (consumer, event_id, aggregate_id, source, type, seq) VALUES
		   ('inventory', 'e-1', 'o-1', 'orders', 'OrderCreated', 1),
		   ('inventory', 'e-1b', 'o-2', NULL, 'OrderCreated', 1)`)

	c := newCluster(t, 1, "orders.events")
	produce(t, producer(t, c.ListenAddrs()), envelope("orders.events", 0, "o-1", "OrderCreated", "e-1", "1", `{}`))

	api := ordersAPI(t, func(int) []apiOrder {
		return []apiOrder{
			{ID: "o-2", Status: "APPROVED", IdempotencyKey: "k2", Customer: "c-2", Items: []models.Item{{SKU: "sku-1", Qty: 2}}, Card: "tok_visa", Total: 500, Trail: []string{"create-order", "approve"}},
			{ID: "o-1", Status: "CANCELLED", IdempotencyKey: "k1"},
		}
	})
	target := Target{
		Workload:  orderDomain.Workload,
		Saga:      orderDomain.Saga,
		Resources: []ResourceQuery{{Name: "stock", Query: targets.Query{DB: "inventory", SQL: `SELECT sku AS key, available, reserved FROM stock ORDER BY sku`}}},
		DrainWait: 300 * time.Millisecond, // e-2 stays unpublished: do not wait the default
		Settle:    100 * time.Millisecond,
		APIURL:    api.URL,
		DSN:       e.DirectDSN,
		Brokers:   c.ListenAddrs(),
		Topics:    []string{"orders.events"},
		Logger:    quiet,
		Observe: targets.Observe{
			Outbox: []targets.Query{
				{DB: "orders", SQL: `SELECT id, event_id, aggregate_id, seq, type, topic, published FROM outbox ORDER BY id`, Complete: true},
				{DB: "inventory", SQL: `SELECT id, event_id, aggregate_id, seq, type, topic, published FROM outbox`, Complete: true},
			},
			Applied: []targets.Query{
				{DB: "inventory", SQL: `SELECT consumer, event_id, aggregate_id, source, type, seq, position FROM processed ORDER BY position`},
				{DB: "orders", SQL: `SELECT event_id FROM outbox`},
			},
		},
	}
	rec := newRecorder(t)
	if err := Observe(context.Background(), rec, target); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	var got, errs []string
	for _, op := range rec.Ops() {
		if op.Proc != models.ProcObserver {
			t.Fatalf("op %v: proc %q", op, op.Proc)
		}
		l := line(op)
		if m := errField.FindString(l); m != "" {
			errs = append(errs, m)
			l = strings.Replace(l, m, `"error":ERR`, 1)
		}
		// The broker timestamp is the producer's clock: present, not fixed;
		// so are the drain watch's times and poll count.
		l = tsField.ReplaceAllString(l, `"timestamp_ns":TS`)
		l = timeField.ReplaceAllString(l, `_t":T`)
		l = pollsField.ReplaceAllString(l, `"polls":N`)
		got = append(got, l)
	}
	want := []string{
		`state observe-plan  {"snapshots":["kafka","orders","resource:stock","drain:orders","outbox:orders","drain:inventory","outbox:inventory","applied:inventory","applied:orders"]}`,
		`state outbox-drain  {"db":"orders","settle_ms":100,"from_t":T,"to_t":T,"polls":N,"idle_since_t":T,"pending":[{"id":2,"event_id":"e-2","aggregate":"o-1","type":"OrderCancelled","first_seen_t":T}],"drained":false}`,
		`state outbox-drain  {"db":"inventory","settle_ms":100,"from_t":T,"to_t":T,"polls":N,"idle_since_t":T,"drained":false,"error":ERR}`,
		`event OrderCreated o-1 {"topic":"orders.events","partition":0,"offset":0,"key":"o-1","event_id":"e-1","seq":1,"source":"orders","timestamp_ns":TS,"payload":{}}`,
		`state kafka-snapshot  {"topics":["orders.events"],"records":1,"complete":true}`,
		`state order o-1 {"status":"CANCELLED","idempotency_key":"k1"}`,
		`state order o-2 {"status":"APPROVED","idempotency_key":"k2","trail":["create-order","approve"]}`,
		`state orders-snapshot  {"rows":2,"complete":true}`,
		`state resource  {"resource":"stock","key":"sku-1","available":8,"reserved":2}`,
		`state resource  {"resource":"stock","key":"sku-2","available":0,"reserved":0}`,
		`state resource-snapshot  {"db":"stock","rows":2,"complete":true}`,
		`state outbox-row o-1 {"db":"orders","id":1,"event_id":"e-1","seq":1,"type":"OrderCreated","topic":"orders.events","published":true}`,
		`state outbox-row o-1 {"db":"orders","id":2,"event_id":"e-2","seq":2,"type":"OrderCancelled","topic":"orders.events","published":false}`,
		`state outbox-snapshot  {"db":"orders","rows":2,"complete":true}`,
		`state outbox-snapshot  {"db":"inventory","rows":0,"complete":false,"error":ERR}`,
		`state applied o-1 {"consumer":"inventory","event_id":"e-1","source":"orders","type":"OrderCreated","seq":1,"position":1}`,
		`state applied o-2 {"consumer":"inventory","event_id":"e-1b","type":"OrderCreated","seq":1,"position":2}`,
		`state applied-snapshot  {"db":"inventory","rows":2,"complete":false}`,
		`state applied-snapshot  {"db":"orders","rows":0,"complete":false,"error":ERR}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ops:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if len(errs) != 3 || !strings.Contains(errs[0], `relation \"outbox\" does not exist`) || !strings.Contains(errs[1], `relation \"outbox\" does not exist`) || !strings.Contains(errs[2], `no column \"consumer\"`) {
		t.Fatalf("errors %q: want the missing table and the missing column named", errs)
	}
	// The plan names exactly the closing ops Observe wrote (a resource's
	// is resource:<name>): the checkers' completeness precondition finds
	// each of them, and nothing missing, once the run ends.
	rec.Record(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int64{"elapsed_ms": 1})
	if miss := checkers.NewIndex(&models.History{Ops: rec.Ops()}, *orderDomain.Saga).Incomplete(); miss != "" {
		t.Fatalf("a finished observation is incomplete to the checkers: %s", miss)
	}
}

// The plan lists what Observe writes for the target it is given: no saga
// list for an outbox-only target, one resource:<name> per counted resource.
func TestPlanFollowsTheDomain(t *testing.T) {
	obs := targets.Observe{Outbox: []targets.Query{{DB: "trips"}}, Applied: []targets.Query{{DB: "trips"}}}
	got := plan(Target{Observe: obs})
	if want := []string{"kafka", "drain:trips", "outbox:trips", "applied:trips"}; !slices.Equal(got, want) {
		t.Fatalf("outbox-only plan %v, want %v", got, want)
	}
	got = plan(Target{Observe: obs, Saga: orderDomain.Saga, Resources: []ResourceQuery{{Name: "seats"}, {Name: "stock"}}})
	if want := []string{"kafka", "orders", "resource:seats", "resource:stock", "drain:trips", "outbox:trips", "applied:trips"}; !slices.Equal(got, want) {
		t.Fatalf("plan %v, want %v", got, want)
	}
}

func TestObserveWithTheAPIDownRecordsAFailedSnapshot(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	rec := newRecorder(t)
	if err := Observe(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: down.URL, Logger: quiet}); err != nil {
		t.Fatalf("Observe: %v (a failed part is recorded, not returned)", err)
	}
	ops := rec.Ops()
	if len(ops) != 3 || ops[0].F != models.FObservePlan || ops[1].F != models.FKafkaSnapshot || ops[2].F != FOrdersSnapshot {
		t.Fatalf("ops %v, want the plan, the kafka snapshot, then the orders snapshot", ops)
	}
	var s Snapshot
	ops[2].Decode(&s)
	if s.Complete || s.Rows != 0 || !strings.Contains(s.Error, "connection refused") {
		t.Fatalf("orders snapshot %+v, want incomplete with the cause", s)
	}
}

func TestObserveReportsAPIErrorsVerbatim(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"code":"unavailable","error":"db down"}`)
	}))
	t.Cleanup(srv.Close)
	rec := newRecorder(t)
	observeOrders(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: srv.URL, Logger: quiet})
	var s Snapshot
	rec.Ops()[0].Decode(&s)
	if s.Complete || !strings.Contains(s.Error, "503") || !strings.Contains(s.Error, "db down") {
		t.Fatalf("snapshot %+v", s)
	}
}

func quiesceOp(t *testing.T, rec *models.Recorder) models.Quiesce {
	t.Helper()
	ops := rec.Ops()
	if len(ops) != 1 || ops[0].Type != models.State || ops[0].F != models.FQuiesce || ops[0].Proc != models.ProcObserver {
		t.Fatalf("ops %v, want one quiesce state op", ops)
	}
	var q models.Quiesce
	ops[0].Decode(&q)
	return q
}

func TestQuiesce(t *testing.T) {
	t.Run("waits until every order is terminal", func(t *testing.T) {
		// o-2 turns terminal on the 4th poll: counted, not timed.
		api := ordersAPI(t, func(n int) []apiOrder {
			st := "PENDING"
			if n >= 4 {
				st = "CANCELLED"
			}
			return []apiOrder{{ID: "o-1", Status: "APPROVED"}, {ID: "o-2", Status: st}}
		})
		rec := newRecorder(t)
		q, err := Quiesce(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: api.URL}, time.Minute, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !q.AllTerminal || q.Pending != nil || q.DeadlineMS != 60000 {
			t.Fatalf("quiesce %+v", q)
		}
		if rq := quiesceOp(t, rec); !rq.AllTerminal || rq.WaitedMS != q.WaitedMS {
			t.Fatalf("recorded %+v, returned %+v", rq, q)
		}
	})
	t.Run("deadline with sagas in flight is a finding", func(t *testing.T) {
		api := ordersAPI(t, func(int) []apiOrder {
			return []apiOrder{{ID: "o-3", Status: "PENDING"}, {ID: "o-1", Status: "APPROVED"}, {ID: "o-2", Status: "WEIRD"}}
		})
		rec := newRecorder(t)
		q, err := Quiesce(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: api.URL}, 200*time.Millisecond, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("err %v: a deadline is evidence, not an error", err)
		}
		if q.AllTerminal || !slices.Equal(q.Pending, []string{"o-2", "o-3"}) {
			t.Fatalf("quiesce %+v", q)
		}
		if rq := quiesceOp(t, rec); !slices.Equal(rq.Pending, q.Pending) {
			t.Fatalf("recorded %+v", rq)
		}
	})
	t.Run("an API that never answers is an error and recorded as unknown", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		rec := newRecorder(t)
		q, err := Quiesce(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: down.URL, Logger: quiet}, 100*time.Millisecond, 10*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "never answered") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("err = %v", err)
		}
		if rq := quiesceOp(t, rec); rq.AllTerminal || rq.Pending != nil || q.AllTerminal {
			t.Fatalf("recorded %+v: no claim may be made", rq)
		}
	})
	t.Run("no orders at all is quiet", func(t *testing.T) {
		api := ordersAPI(t, func(int) []apiOrder { return nil })
		rec := newRecorder(t)
		q, err := Quiesce(context.Background(), rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: api.URL}, time.Minute, time.Millisecond)
		if err != nil || !q.AllTerminal {
			t.Fatalf("%+v %v", q, err)
		}
	})
	t.Run("a cancelled context ends the wait", func(t *testing.T) {
		api := ordersAPI(t, func(int) []apiOrder { return []apiOrder{{ID: "o-1", Status: "PENDING"}} })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := newRecorder(t)
		_, err := Quiesce(ctx, rec, Target{Workload: orderDomain.Workload, Saga: orderDomain.Saga, APIURL: api.URL, Logger: quiet}, time.Minute, time.Millisecond)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		quiesceOp(t, rec)
	})
}

// A saga whose target reports no status (status_from events) is read from
// the outbox: its success event makes it success, its failure event
// failure; an acknowledged saga with no terminal row yet is pending.
func TestSagasFromEvents(t *testing.T) {
	e := postgres(t)
	exec(t, e.DirectDSN("orders"),
		`DROP TABLE IF EXISTS trip_outbox`,
		`CREATE TABLE trip_outbox (id bigserial PRIMARY KEY, aggregate_id text, type text)`,
		`INSERT INTO trip_outbox (aggregate_id, type) VALUES ('t-1', 'TripRequested'), ('t-1', 'TripBooked'), ('t-2', 'TripRequested'), ('t-3', 'TripAborted')`)
	saga := &models.SagaSpec{Pending: "PENDING", Success: "BOOKED", Failure: "ABORTED", SuccessEvent: "TripBooked", FailureEvent: "TripAborted", StatusFrom: models.StatusFromEvents}
	tg := Target{Saga: saga, DSN: e.DirectDSN, Logger: quiet, IDs: func() []string { return []string{"t-1", "t-2", "t-4"} },
		Observe: targets.Observe{Outbox: []targets.Query{{DB: "orders", SQL: `SELECT aggregate_id, type FROM trip_outbox ORDER BY id`}}}}
	got, complete, err := listSagas(context.Background(), tg)
	if err != nil || !complete {
		t.Fatalf("listSagas: %v complete=%v", err, complete)
	}
	var lines []string
	for _, s := range got {
		lines = append(lines, s.ID+" "+s.Status)
	}
	if want := []string{"t-1 BOOKED", "t-2 PENDING", "t-3 ABORTED", "t-4 PENDING"}; !slices.Equal(lines, want) {
		t.Fatalf("sagas %v, want %v", lines, want)
	}
}
