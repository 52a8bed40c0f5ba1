package reference_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/relay"
)

// Competing relays (in-process here, real PostgreSQL and Kafka protocol)
// drain an outbox that writers fill concurrently, with small batches so
// that one aggregate's rows are split across polls and relays. Every row
// must reach Kafka, and per aggregate the first occurrences must be in
// seq order.
//
// One relay stalls with its rows locked (a failpoint sleep after its third
// select) while the others go on: that is when a relay without the
// per-aggregate lock publishes a later row of the same order first. The
// parallel-relay-reorder case shows the check catches exactly that.
func TestCompetingRelaysKeepPerAggregateOrder(t *testing.T) {
	for _, c := range []struct {
		mutant      string
		wantReorder bool
	}{{"", false}, {mutant.ParallelRelayReorder, true}} {
		name := c.mutant
		if name == "" {
			name = "correct"
		}
		t.Run(name, func(t *testing.T) {
			if err := mutant.Set(c.mutant); err != nil {
				t.Fatal(err)
			}
			defer mutant.Set("")
			if err := failpoint.Setup("relay.after-select=sleep(150ms)@3", "", "test"); err != nil {
				t.Fatal(err)
			}
			defer failpoint.Reset()
			reorders := competingRelays(t)
			if c.wantReorder && reorders == 0 {
				t.Errorf("no reorder seen with %s: the check has no teeth", c.mutant)
			}
			if !c.wantReorder && reorders > 0 {
				t.Errorf("%d per-aggregate reorders with the per-aggregate lock", reorders)
			}
		})
	}
}

// competingRelays runs the scenario and returns how many records were
// first seen out of seq order.
func competingRelays(t *testing.T) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"svc"}, Topics: []env.Topic{{Name: "t", Partitions: 3}}})
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
	const aggs, perAgg, relays = 30, 20, 3
	// Writers: one goroutine per aggregate group, each row its own transaction.
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perAgg; i++ {
				for a := w; a < aggs; a += 6 {
					tx, err := pool.Begin(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := outbox.Add(ctx, tx, "svc", outbox.Message{Topic: "t", Type: "Step", Payload: msg.Payload{OrderID: fmt.Sprintf("o-%d", a)}}); err != nil {
						t.Error(err)
					}
					if i%7 == 3 {
						tx.Rollback(ctx) // leaves a gap in the ids
						continue
					}
					if err := tx.Commit(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	rctx, stopRelays := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	var logMu sync.Mutex
	var logBuf strings.Builder
	defer func() {
		if t.Failed() || os.Getenv("RELAY_TEST_LOG") != "" {
			t.Logf("relay log:\n%s", logBuf.String())
		}
	}()
	for r := 0; r < relays; r++ {
		lg := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logBuf.Write(b)
		}), &slog.HandlerOptions{Level: slog.LevelDebug})).With("relay", r)
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.DirectBrokers()...), kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			relay.Run(rctx, relay.Config{Sources: []relay.Source{{Name: "svc", Pool: pool}}, Client: cl, Batch: 7,
				Interval: 2 * time.Millisecond, Retention: time.Hour, CleanupEvery: time.Hour, Log: lg})
		}()
	}
	wg.Wait()
	var committed int64
	for {
		var left int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE published_at IS NULL), count(*) FROM outbox`).Scan(&left, &committed); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d rows never published", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopRelays()
	rwg.Wait()

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.DirectBrokers()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]int64{} // aggregate → next expected first-seen seq
	seen := map[string]bool{}
	var records int64
	reorders := 0
	for int64(len(seen)) < committed {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d distinct events of %d committed rows", len(seen), committed)
		}
		fs.EachRecord(func(r *kgo.Record) {
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
			if string(r.Key) != agg {
				t.Errorf("record key %q, aggregate %q", r.Key, agg)
			}
			if seen[id] {
				return // a duplicate is legal
			}
			seen[id] = true
			if next[agg] == 0 {
				next[agg] = 1
			}
			if seq != next[agg] {
				reorders++
				t.Logf("aggregate %s: first sight of seq %d, expected %d next", agg, seq, next[agg])
			}
			next[agg] = seq + 1
		})
	}
	t.Logf("%d committed rows over %d aggregates, %d records read, %d relays, %d reorders", committed, aggs, records, relays, reorders)
	return reorders
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
