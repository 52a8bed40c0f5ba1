package reference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
	"github.com/sagachaos/sagachaos/targets/reference/internal/cdcrelay"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
)

func cdcSettings(on bool) map[string]string {
	if !on {
		return nil
	}
	return map[string]string{"wal_level": "logical", "max_replication_slots": "16", "max_wal_senders": "16"}
}

func relayComponent(cdc bool) string {
	if cdc {
		return "cdc-relay"
	}
	return "relay"
}

// Competing CDC relays (in process, on a real cluster with a real slot)
// drain an outbox that writers fill concurrently while the holder of the
// slot is killed again and again and PostgreSQL crashes once: every
// committed row must reach Kafka (duplicates are legal), first
// appearances must be in seq order per aggregate, and the slot must have
// changed hands. With cdc-confirm-before-ack and a relay that fails right
// after confirming, rows are lost: proof that the check has teeth.
func TestCompetingCDCRelaysLoseNothingAndKeepOrder(t *testing.T) {
	for _, c := range []struct {
		mutant, failpoints string
		wantLoss           bool
	}{
		{"", "relay.after-confirm=error@5;relay.before-confirm=error@9;relay.after-decode=error@13", false},
		// No PostgreSQL crash here: it can move the confirmed position back
		// past the skipped rows and stream them again (late, out of order:
		// per-aggregate-order would then catch what no-loss does not).
		{mutant.CDCConfirmBeforeAck, "relay.after-confirm=error@5;relay.after-confirm=error@9", true},
	} {
		name := c.mutant
		if name == "" {
			name = "correct"
		}
		t.Run(name, func(t *testing.T) {
			if err := mutant.Set(c.mutant); err != nil {
				t.Fatal(err)
			}
			defer mutant.Set("")
			if err := failpoint.Setup(c.failpoints, "", "test"); err != nil {
				t.Fatal(err)
			}
			defer failpoint.Reset()
			r := competingCDCRelays(t, !c.wantLoss)
			switch {
			case c.wantLoss && r.lost == 0:
				t.Errorf("no row lost with %s: the check has no teeth", c.mutant)
			case !c.wantLoss && r.lost > 0:
				t.Errorf("%d committed rows never reached Kafka", r.lost)
			}
			if r.reorders > 0 && !c.wantLoss {
				t.Errorf("%d per-aggregate reorders", r.reorders)
			}
			if !c.wantLoss && len(r.holders) < 2 {
				t.Errorf("the slot never changed hands (holders %v): the kills did not fail it over", r.holders)
			}
		})
	}
}

type cdcResult struct {
	lost, reorders int
	holders        map[string]bool
}

func competingCDCRelays(t *testing.T, crash bool) cdcResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"svc"}, Topics: []env.Topic{{Name: "t", Partitions: 3}},
		PostgresSettings: cdcSettings(true)})
	if err != nil {
		t.Fatalf("environment up (needs the PostgreSQL binaries, see harness/env): %v", err)
	}
	defer e.Close()
	pool, err := pgxpool.New(ctx, e.DirectDSN("svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, outbox.Schema); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logBuf strings.Builder
	defer func() {
		if t.Failed() || os.Getenv("RELAY_TEST_LOG") != "" {
			t.Logf("relay log:\n%s", logBuf.String())
		}
	}()
	newRelay := func(name string) (*cdcrelay.Relay, *kgo.Client) {
		lg := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logBuf.Write(b)
		}), &slog.HandlerOptions{Level: slog.LevelDebug})).With("relay", name)
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.DirectBrokers()...), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
		if err != nil {
			t.Fatal(err)
		}
		return cdcrelay.New(cdcrelay.Config{Sources: []cdcrelay.Source{{Name: "svc", DSN: e.DirectDSN("svc")}}, Client: cl,
			Instance: name, Wait: 20 * time.Millisecond, Batch: 5, Log: lg}), cl
	}
	// Three relays, each run until the chaos loop kills it, then again.
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
		relay  *cdcrelay.Relay
	}
	var mu sync.Mutex
	relays := map[string]*running{}
	stopping := false
	start := func(name string) {
		mu.Lock()
		stop := stopping
		mu.Unlock()
		if stop {
			return
		}
		rl, cl := newRelay(name)
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer cl.Close()
			if err := rl.Run(rctx); err != nil {
				t.Errorf("relay %s: %v", name, err)
			}
		}()
		mu.Lock()
		if stopping {
			rcancel()
		}
		relays[name] = &running{cancel: rcancel, done: done, relay: rl}
		mu.Unlock()
	}
	names := []string{"cdc-1", "cdc-2", "cdc-3"}
	for _, n := range names {
		start(n)
	}
	slot := cdcrelay.SlotName("svc")
	holder := func() string {
		var app string
		_ = pool.QueryRow(ctx, `SELECT coalesce(a.application_name, '') FROM pg_replication_slots s
			LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1 AND s.active`, slot).Scan(&app)
		return app
	}
	res := cdcResult{holders: map[string]bool{}}
	// Rows committed before the slot exists are never decoded: the relays'
	// health waits for it, and so do the writers here. (The slot is
	// active while it is being created, so "held" is not "exists".)
	ready := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range relays {
			if r.relay.Ready() {
				return true
			}
		}
		return false
	}
	for !ready() {
		if ctx.Err() != nil {
			t.Fatal("no relay ever made the slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	const aggs, perAgg = 24, 20
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Go(func() {
			for i := 0; i < perAgg; i++ {
				for a := w; a < aggs; a += 6 {
					for ctx.Err() == nil {
						if err := writeRow(ctx, pool, fmt.Sprintf("o-%d", a), i%7 == 3); err == nil {
							time.Sleep(10 * time.Millisecond)
							break
						}
						time.Sleep(20 * time.Millisecond) // the server is restarting
					}
				}
			}
		})
	}
	// Chaos while the writers write: kill the slot's holder (its
	// connections close, as when the process dies), restart it a moment
	// later; once, crash PostgreSQL.
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	kills := 0
	for round := 0; ; round++ {
		select {
		case <-writersDone:
		case <-time.After(150 * time.Millisecond):
			h := holder()
			if h != "" {
				res.holders[h] = true
			}
			if round == 6 && crash {
				if err := e.CrashPostgres(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
				if err := e.RestartPostgres(ctx); err != nil {
					t.Fatal(err)
				}
				continue
			}
			mu.Lock()
			r := relays[h]
			mu.Unlock()
			if r == nil {
				continue
			}
			r.cancel()
			<-r.done
			kills++
			go func() { time.Sleep(100 * time.Millisecond); start(h) }()
			continue
		}
		break
	}
	var committed int64
	for {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&committed)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // a connection from before the crash
	}
	// Read the log until every committed row is in it, or nothing new came
	// for a while (then what is missing is lost).
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.DirectBrokers()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]int64{}
	seen := map[string]bool{}
	records := 0
	quiet := time.Now()
	for int64(len(seen)) < committed && time.Since(quiet) < 5*time.Second && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			quiet = time.Now()
			records++
			var id, agg string
			var seq int64
			for _, h := range r.Headers {
				switch h.Key {
				case models.HeaderEventID:
					id = string(h.Value)
				case models.HeaderAggregateID:
					agg = string(h.Value)
				case models.HeaderSeq:
					seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			if seen[id] {
				return // a duplicate is legal
			}
			seen[id] = true
			if next[agg] == 0 {
				next[agg] = 1
			}
			if seq != next[agg] {
				res.reorders++
				t.Logf("aggregate %s: first sight of seq %d, expected %d next", agg, seq, next[agg])
			}
			next[agg] = seq + 1
		})
	}
	res.lost = int(committed) - len(seen)
	if res.lost > 0 {
		rows, _ := pool.Query(ctx, `SELECT id, event_id, aggregate_id, seq, xmin::text FROM outbox ORDER BY id`)
		for rows.Next() {
			var id, seq int64
			var ev, agg, xmin string
			_ = rows.Scan(&id, &ev, &agg, &seq, &xmin)
			if !seen[ev] {
				t.Logf("lost: outbox #%d %s:%d (xmin %s, event %s)", id, agg, seq, xmin, ev)
			}
		}
		rows.Close()
	}
	mu.Lock()
	stopping = true
	all := make([]*running, 0, len(relays))
	for _, r := range relays {
		all = append(all, r)
	}
	mu.Unlock()
	time.Sleep(150 * time.Millisecond) // a restart under way sees stopping
	mu.Lock()
	for _, r := range relays {
		all = append(all, r)
	}
	mu.Unlock()
	for _, r := range all {
		r.cancel()
		<-r.done
	}
	t.Logf("%d committed rows over %d aggregates, %d records read (%d duplicates), %d holder kills, holders %v, %d lost, %d reorders",
		committed, aggs, records, records-len(seen), kills, res.holders, res.lost, res.reorders)
	return res
}

// writeRow commits one outbox row for agg (or rolls it back: a gap in the
// ids that the slot never shows).
func writeRow(ctx context.Context, pool *pgxpool.Pool, agg string, rollback bool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := outbox.Add(ctx, tx, "svc", outbox.Message{Topic: "t", Type: "Step", Payload: msg.Payload{OrderID: agg}}); err != nil {
		return err
	}
	if rollback {
		return nil
	}
	return tx.Commit(ctx)
}

// The whole saga with the CDC relays: declines and out-of-stock orders, a
// crash at each of the CDC relay's failpoints, every saga ends correctly
// and the world agrees with the states.
func TestCDCSagaAndCrashAtEveryCDCFailpoint(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 16
	}
	for _, p := range failpoint.CDCCatalogue {
		t.Run(p.Name, func(t *testing.T) {
			reqs, stock := workload("cdc", n)
			s := startSystem(t, sysOpts{stock: stock, cdc: true, failpoints: map[string]string{"relay-1": p.Name + "=crash@3", "relay-2": p.Name + "=crash@3"}})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			r1, r2 := s.restartOnCrash(ctx, "relay-1"), s.restartOnCrash(ctx, "relay-2")
			placed := s.placeAll(ctx, reqs, 4)
			final := s.settle(ctx, len(placed))
			if !fired(t, s.fpLog, p.Name) {
				t.Fatalf("failpoint %s never fired (logs in %s)\n%s", p.Name, s.logDir, s.tails())
			}
			if r1()+r2() < 1 {
				t.Errorf("%s fired but no relay was restarted", p.Name)
			}
			s.verify(ctx, placed, final)
		})
	}
}

// The CDC manifest is the reference manifest but for what the CDC relay
// changes: a guard against the two drifting apart.
func TestCDCManifestMatchesTheReference(t *testing.T) {
	ref, err := targets.LoadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := targets.LoadManifest(filepath.Join("..", "reference-cdc", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cdc.PostgresSetting("wal_level"); got != "logical" {
		t.Errorf("reference-cdc wal_level = %q", got)
	}
	for _, q := range cdc.Observe.Outbox {
		if q.Published != targets.PublishedLog || strings.Contains(q.SQL, "published") {
			t.Errorf("outbox query of %s: published %q, sql %q: a CDC outbox has no published mark", q.DB, q.Published, q.SQL)
		}
	}
	var slots []string
	for _, p := range cdc.Processes {
		if p.Role == "relay" {
			for _, s := range p.Slots {
				slots = append(slots, s.DB)
			}
		}
	}
	if !reflect.DeepEqual(slots, cdc.Databases) {
		t.Errorf("the relay declares slots on %v, want every outbox database %v", slots, cdc.Databases)
	}
	// Everything else is the reference's.
	norm := func(m *targets.Manifest) string {
		c := *m
		c.Name, c.Description, c.Postgres, c.Failpoints, c.Mutants, c.Dir, c.Path = "", "", nil, nil, nil, "", ""
		c.Processes = nil
		for _, p := range m.Processes {
			if p.Role == "relay" {
				p.Command, p.Env, p.Slots = nil, nil, nil
			}
			c.Processes = append(c.Processes, p)
		}
		c.Observe.Outbox = nil
		b, _ := json.MarshalIndent(c, "", " ")
		return string(b)
	}
	if a, b := norm(ref), norm(cdc); a != b {
		t.Errorf("reference-cdc/manifest.json drifted from reference/manifest.json beyond the relay:\n--- reference\n%s\n--- reference-cdc\n%s", a, b)
	}
	for _, m := range cdc.Mutants {
		if !strings.HasPrefix(m.Name, "cdc-") {
			t.Errorf("reference-cdc lists %s: its mutants are the CDC relay's", m.Name)
		}
		if _, ok := mutant.Implemented[m.Name]; !ok {
			t.Errorf("mutant %s has no switch in the code", m.Name)
		}
	}
}
