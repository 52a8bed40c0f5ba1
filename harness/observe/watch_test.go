package observe

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

const outboxSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, published FROM watch_outbox ORDER BY id`

// watchOutbox makes a fresh outbox in the orders database with the given
// rows (event id, aggregate, published).
func watchOutbox(t *testing.T, rows ...[3]any) targets.Query {
	e := postgres(t)
	exec(t, e.DirectDSN("orders"), `DROP TABLE IF EXISTS watch_outbox`,
		`CREATE TABLE watch_outbox (id bigserial PRIMARY KEY, event_id text, aggregate_id text, seq bigint, type text, topic text, published bool)`)
	for i, r := range rows {
		exec(t, e.DirectDSN("orders"), fmt.Sprintf(`INSERT INTO watch_outbox (event_id, aggregate_id, seq, type, topic, published) VALUES ('%s', '%s', %d, 'T', 'orders', %v)`, r[0], r[1], i+1, r[2]))
	}
	return targets.Query{DB: "orders", SQL: outboxSQL, Complete: true}
}

func opsOf(rec *models.Recorder, f string) []models.Op {
	var out []models.Op
	for _, o := range rec.Ops() {
		if o.F == f {
			out = append(out, o)
		}
	}
	return out
}

func drainOp(t *testing.T, rec *models.Recorder) models.OutboxDrain {
	t.Helper()
	ops := opsOf(rec, models.FOutboxDrain)
	if len(ops) != 1 {
		t.Fatalf("%d drain ops, want 1", len(ops))
	}
	var d models.OutboxDrain
	if err := ops[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDrainWatch(t *testing.T) {
	e := postgres(t)
	t.Run("a row that stays unpublished with the outbox idle is proven stuck and ends the wait", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-1", "o-1", true}, [3]any{"e-2", "o-1", false})
		rec := newRecorder(t)
		settle := 300 * time.Millisecond
		// a bound of a minute: the wait can only end this test by proof
		pub := drainWatch(context.Background(), rec, Target{DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Settle: settle, DrainWait: time.Minute, Logger: quiet})
		d := drainOp(t, rec)
		if d.Drained || len(d.Pending) != 1 || d.Pending[0].EventID != "e-2" || d.Pending[0].Aggregate != "o-1" || d.Error != "" {
			t.Fatalf("drain %+v", d)
		}
		if w := d.ToT - max(d.Pending[0].FirstSeenT, d.IdleSinceT); w < int64(settle) {
			t.Fatalf("stopped after a quiet window of %v, want ≥ %v", time.Duration(w), settle)
		}
		if !pub["orders"]["e-1"] || pub["orders"]["e-2"] {
			t.Fatalf("published set %v", pub)
		}
	})
	t.Run("a relay that exited is no proof: the wait runs to its bound", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-2", "o-1", false})
		rec := newRecorder(t)
		rec.Record(models.ProcHarness, models.Info, models.FHealed, "", models.Healed{Healthy: []string{"relay-1", "relay-2"}})
		rec.Record(models.ProcComponentPrefix+"relay-2", models.Info, models.FComponentExit, "", models.ComponentEvent{Instance: "relay-2", Incarnation: 1})
		decl := &models.TargetDecl{Relays: []string{"relay-1", "relay-2"}}
		drainWatch(context.Background(), rec, Target{DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Settle: 100 * time.Millisecond, DrainWait: 1500 * time.Millisecond, Decl: decl, Logger: quiet})
		d := drainOp(t, rec)
		if d.Drained || len(d.Pending) != 1 {
			t.Fatalf("drain %+v", d)
		}
		// the checker agrees: not proven, and it says which relay
		h := checkers.HealthOf(rec.Ops())
		if _, why, _ := h.From(decl.Relays, d.Pending[0].FirstSeenT, d.ToT); why == "" {
			t.Fatal("relay-2's exit not seen")
		}
		if d.ToT-d.FromT < int64(1500*time.Millisecond) {
			t.Fatalf("stopped after %v, before its bound, without a proof", time.Duration(d.ToT-d.FromT))
		}
	})
	t.Run("a CDC outbox is not idle while its relay appends duplicates to the log", func(t *testing.T) {
		// published: log — e-1 is in the log, e-2 is not. Before each of
		// the watch's first polls the "relay" streams e-1 again (what a
		// CDC relay does after a crash, from its slot's confirmed
		// position): the outbox table never changes, the log does.
		exec(t, e.DirectDSN("orders"), `DROP TABLE IF EXISTS cdc_watch_outbox`,
			`CREATE TABLE cdc_watch_outbox (id bigserial PRIMARY KEY, event_id text, aggregate_id text, seq bigint, type text, topic text)`,
			`INSERT INTO cdc_watch_outbox (event_id, aggregate_id, seq, type, topic) VALUES ('e-1', 'o-1', 1, 'T', 'orders'), ('e-2', 'o-1', 2, 'T', 'orders')`)
		q := targets.Query{DB: "orders", SQL: `SELECT id, event_id, aggregate_id, seq, type, topic FROM cdc_watch_outbox ORDER BY id`, Complete: true, Published: targets.PublishedLog}
		c := newCluster(t, 1, "orders")
		cl := producer(t, c.ListenAddrs())
		produce(t, cl, envelope("orders", 0, "o-1", "T", "e-1", "1", `{}`))
		rec := newRecorder(t)
		const streamed = 8
		var polls int
		var lastDup int64
		dsn := func(db string) string {
			if polls++; polls <= streamed {
				produce(t, cl, envelope("orders", 0, "o-1", "T", "e-1", "1", `{}`))
				lastDup = historyT(rec)
			}
			return e.DirectDSN(db)
		}
		tg, done := withLogTail(Target{DSN: dsn, Brokers: c.ListenAddrs(), Topics: []string{"orders"}, Observe: targets.Observe{Outbox: []targets.Query{q}}, Settle: 300 * time.Millisecond, DrainWait: time.Minute, Logger: quiet})
		defer done()
		drainWatch(context.Background(), rec, tg)
		d := drainOp(t, rec)
		if polls <= streamed || d.Drained || len(d.Pending) != 1 || d.Pending[0].EventID != "e-2" {
			t.Fatalf("after %d polls: drain %+v", polls, d)
		}
		// idle only since the log stopped growing: the proof's window
		// starts after the last duplicate
		if d.IdleSinceT < lastDup {
			t.Fatalf("idle since %v, but the log grew at %v", time.Duration(d.IdleSinceT), time.Duration(lastDup))
		}
	})
	t.Run("rows added while nothing is published do not make the outbox busy", func(t *testing.T) {
		// an owner re-sending into a relay that publishes nothing: a new
		// unpublished row before every poll, no row ever published
		q := watchOutbox(t, [3]any{"e-1", "o-1", true}, [3]any{"e-2", "o-1", false})
		n := 0
		dsn := func(db string) string {
			n++
			exec(t, e.DirectDSN("orders"), fmt.Sprintf(`INSERT INTO watch_outbox (event_id, aggregate_id, seq, type, topic, published) VALUES ('r-%d', 'o-1', %d, 'T', 'orders', false)`, n, n+2))
			return e.DirectDSN(db)
		}
		rec := newRecorder(t)
		settle := 300 * time.Millisecond
		drainWatch(context.Background(), rec, Target{DSN: dsn, Observe: targets.Observe{Outbox: []targets.Query{q}}, Settle: settle, DrainWait: 1500 * time.Millisecond, Logger: quiet})
		d := drainOp(t, rec)
		if d.Drained || len(d.Pending) < 2 || d.Pending[0].EventID != "e-2" {
			t.Fatalf("drain %+v", d)
		}
		// idle since the first poll: e-2's window is the whole watch
		if d.IdleSinceT > d.Pending[0].FirstSeenT || d.ToT-max(d.IdleSinceT, d.Pending[0].FirstSeenT) < int64(settle) {
			t.Fatalf("drain %+v: the added rows counted as the relay's progress", d)
		}
	})
	t.Run("a row published during the watch drains it", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-2", "o-1", false})
		go func() {
			time.Sleep(200 * time.Millisecond)
			exec(t, e.DirectDSN("orders"), `UPDATE watch_outbox SET published = true`)
		}()
		rec := newRecorder(t)
		pub := drainWatch(context.Background(), rec, Target{DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Settle: 10 * time.Second, DrainWait: time.Minute, Logger: quiet})
		if d := drainOp(t, rec); !d.Drained || len(d.Pending) != 0 || !pub["orders"]["e-2"] {
			t.Fatalf("drain %+v, published %v", d, pub)
		}
	})
}

func TestQuiesceProvesStuckSagas(t *testing.T) {
	e := postgres(t)
	spec := models.OrderSaga
	spec.StepTimeoutMS = 100 // k = 3: stuck after 300 ms unchanged
	pending := ordersAPI(t, func(int) []apiOrder {
		return []apiOrder{{ID: "o-1", Status: "PENDING", Trail: []string{"create-order"}}, {ID: "o-2", Status: "APPROVED"}}
	})
	t.Run("a saga nothing happens to is proven stuck and ends the wait early", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-1", "o-1", true})
		rec := newRecorder(t)
		tg := Target{APIURL: pending.URL, DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Workload: orderDomain.Workload, Saga: &spec, Logger: quiet}
		got, err := Quiesce(context.Background(), rec, tg, time.Minute, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !got.EarlyStop || got.AllTerminal || len(got.Sagas) != 1 || got.Sagas[0].ID != "o-1" || got.Sagas[0].Rows != 1 {
			t.Fatalf("quiesce %+v", got)
		}
		if got.StuckAfterMS != 300 || got.CheckedT-max(got.Sagas[0].ChangedT, got.FromT) < 300e6 {
			t.Fatalf("quiesce %+v: window shorter than k step timeouts", got)
		}
	})
	t.Run("a saga whose owner keeps writing rows is not stuck", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-1", "o-1", true})
		var stop atomic.Bool
		done := make(chan struct{})
		go func() { // the owner re-sends every 50 ms
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				exec(t, e.DirectDSN("orders"), fmt.Sprintf(`INSERT INTO watch_outbox (event_id, aggregate_id, seq, type, topic, published) VALUES ('r-%d', 'o-1', %d, 'T', 'orders', true)`, i, i+2))
				time.Sleep(50 * time.Millisecond)
			}
		}()
		rec := newRecorder(t)
		tg := Target{APIURL: pending.URL, DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Workload: orderDomain.Workload, Saga: &spec, Logger: quiet}
		got, err := Quiesce(context.Background(), rec, tg, 1500*time.Millisecond, 20*time.Millisecond)
		stop.Store(true)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if got.EarlyStop || got.AllTerminal || len(got.Sagas) != 1 {
			t.Fatalf("quiesce %+v: stopped early on a saga that kept changing", got)
		}
	})
	// An owner that re-sends at every row check of the watch (the DSN the
	// watch's outbox query connects with writes the row first): when the
	// relay publishes each re-send (the log grows), the saga is not stuck;
	// when it publishes nothing, healthy all along, the re-sends are no
	// action and the saga is proven stuck.
	resend := func(t *testing.T, publish bool) models.Quiesce {
		q := watchOutbox(t, [3]any{"e-1", "o-1", true})
		c := newCluster(t, 1, "orders")
		cl := producer(t, c.ListenAddrs())
		produce(t, cl, envelope("orders", 0, "o-1", "T", "e-1", "1", `{}`))
		n := 0
		dsn := func(db string) string {
			n++
			exec(t, e.DirectDSN("orders"), fmt.Sprintf(`INSERT INTO watch_outbox (event_id, aggregate_id, seq, type, topic, published) VALUES ('r-%d', 'o-1', %d, 'T', 'orders', %v)`, n, n+1, publish))
			if publish {
				produce(t, cl, envelope("orders", 0, "o-1", "T", fmt.Sprintf("r-%d", n), fmt.Sprint(n+1), `{}`))
			}
			return e.DirectDSN(db)
		}
		rec := newRecorder(t)
		tg := Target{APIURL: pending.URL, DSN: dsn, Brokers: c.ListenAddrs(), Topics: []string{"orders"},
			Observe: targets.Observe{Outbox: []targets.Query{q}}, Workload: orderDomain.Workload, Saga: &spec, Settle: 200 * time.Millisecond, Logger: quiet}
		deadline := time.Minute // only a proof can end the stuck case early
		if publish {
			deadline = 1500 * time.Millisecond
		}
		got, err := Quiesce(context.Background(), rec, tg, deadline, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("a saga whose re-sends are published is not stuck", func(t *testing.T) {
		if got := resend(t, true); got.EarlyStop || len(got.Sagas) != 1 || got.Sagas[0].Unpublished {
			t.Fatalf("quiesce %+v: stopped early on a saga whose re-sends reach the log", got)
		}
	})
	t.Run("a saga whose re-sends a healthy relay never publishes is proven stuck", func(t *testing.T) {
		got := resend(t, false)
		if !got.EarlyStop || len(got.Sagas) != 1 || !got.Sagas[0].Unpublished || got.Sagas[0].Rows < 2 {
			t.Fatalf("quiesce %+v", got)
		}
		if got.CheckedT-max(got.Sagas[0].ChangedT, got.FromT) < 300e6 {
			t.Fatalf("quiesce %+v: window shorter than k step timeouts", got)
		}
	})
	t.Run("a component that exited is no proof", func(t *testing.T) {
		q := watchOutbox(t, [3]any{"e-1", "o-1", true})
		rec := newRecorder(t)
		rec.Record(models.ProcComponentPrefix+"orders", models.Info, models.FComponentExit, "", models.ComponentEvent{Instance: "orders", Incarnation: 1})
		tg := Target{APIURL: pending.URL, DSN: e.DirectDSN, Observe: targets.Observe{Outbox: []targets.Query{q}}, Workload: orderDomain.Workload, Saga: &spec, Logger: quiet}
		got, err := Quiesce(context.Background(), rec, tg, time.Second, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got.EarlyStop {
			t.Fatalf("quiesce %+v: stopped early with a component down", got)
		}
	})
	t.Run("without a step timeout the wait runs to its deadline as before", func(t *testing.T) {
		rec := newRecorder(t)
		got, err := Quiesce(context.Background(), rec, Target{APIURL: pending.URL, Logger: quiet}, 300*time.Millisecond, 20*time.Millisecond)
		if err != nil || got.EarlyStop || got.StepTimeoutMS != 0 || got.Sagas != nil {
			t.Fatalf("quiesce %+v %v", got, err)
		}
	})
}

func TestObserveOffsets(t *testing.T) {
	c := newCluster(t, 2, "orders")
	cl := producer(t, c.ListenAddrs())
	produce(t, cl, envelope("orders", 0, "o-1", "ReserveStock", "e-1", "1", `{}`), envelope("orders", 0, "o-1", "ReleaseStock", "e-2", "2", `{}`),
		envelope("orders", 1, "o-2", "ReserveStock", "e-3", "1", `{}`))
	adm := kadm.NewClient(cl)
	commit := func(p0, p1 int64) {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: p0})
		os.Add(kadm.Offset{Topic: "orders", Partition: 1, At: p1})
		if _, err := adm.CommitOffsets(context.Background(), "inventory", os); err != nil {
			t.Fatal(err)
		}
	}
	decl := &models.TargetDecl{Consumers: []models.ConsumerDecl{{Consumer: "inventory", Group: "inventory", Topics: []string{"orders"}}}}
	read := func(lag time.Duration) models.ConsumerOffsets {
		rec := newRecorder(t)
		observeOffsets(context.Background(), rec, Target{Brokers: c.ListenAddrs(), Decl: decl, LagWait: lag, Logger: quiet})
		ops := opsOf(rec, models.FConsumerOffsets)
		if len(ops) != 1 {
			t.Fatalf("%d offsets ops", len(ops))
		}
		var co models.ConsumerOffsets
		ops[0].Decode(&co)
		return co
	}
	t.Run("a group behind is recorded as it was, not lag-free", func(t *testing.T) {
		commit(1, 0)
		co := read(300 * time.Millisecond)
		if co.LagFree || co.Error != "" || len(co.Partitions) != 2 || co.Partitions[0].Committed != 1 || co.Partitions[0].End != 2 || co.Partitions[1].Committed != 0 {
			t.Fatalf("offsets %+v", co)
		}
	})
	t.Run("a group that commits nothing more ends the wait before its bound", func(t *testing.T) {
		commit(1, 0)
		co := read(time.Hour) // only the stall can end this test
		if co.LagFree || co.WaitedMS < lagStall.Milliseconds() {
			t.Fatalf("offsets %+v", co)
		}
	})
	t.Run("the wait ends once the group caught up", func(t *testing.T) {
		commit(1, 0)
		go func() { time.Sleep(300 * time.Millisecond); commit(2, 1) }()
		co := read(time.Minute)
		if !co.LagFree || co.Partitions[0].Committed != 2 || co.Partitions[1].Committed != 1 || co.Group != "inventory" || co.Consumer != "inventory" {
			t.Fatalf("offsets %+v", co)
		}
	})
}
