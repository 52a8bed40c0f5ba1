package reference_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groups maps each consumer group (= component) to the topics it reads.
var groups = map[string][]string{
	"orders":    {"inventory", "payment", "delivery"},
	"inventory": {"orders"},
	"payment":   {"orders"},
	"delivery":  {"orders"},
}

// Every Kafka message delivered again, twice over: first the relays
// republish every outbox row (as after a crash between ack and mark), then
// every consumer group is rewound to offset 0 and reads the whole log
// again. Nothing may change anywhere: no world effect, no stock, no order
// state, no inbox or outbox row.
func TestRedeliveryHasNoSecondEffect(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 60
	}
	reqs, stock := workload("dup", n)
	s := startSystem(t, sysOpts{stock: stock})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	placed := s.placeAll(ctx, reqs, 8)
	final := s.settle(ctx, len(placed))
	s.verify(ctx, placed, final)
	s.waitDrained(ctx)
	before := s.snapshot(ctx)

	// 1. Relay-side duplication: every row unpublished again.
	republish := func(s *system) {
		for _, db := range dbNames {
			s.exec(ctx, db, `UPDATE outbox SET published_at = NULL`)
		}
		s.waitDrained(ctx)
	}
	republish(s)
	if got := s.snapshot(ctx); !maps.Equal(got, before) {
		t.Errorf("republishing every outbox row changed the system:\n%s", diff(before, got))
	}
	var rows, records int64
	for _, db := range dbNames {
		rows += before[db+".outbox"]
	}
	ends, err := kadm.NewClient(s.kafka(t)).ListEndOffsets(ctx, dbNames...)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) { records += o.Offset })
	if records < 2*rows {
		t.Fatalf("the log holds %d records for %d outbox rows: the republish did not duplicate every message", records, rows)
	}

	// 2. Consumer-side duplication: rewind every group to the start.
	adm := kadm.NewClient(s.kafka(t))
	for g, topics := range groups {
		if err := s.sup.Proc(g).Kill(); err != nil {
			t.Fatalf("stop %s: %v", g, err)
		}
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			t.Fatalf("list start offsets: %v", err)
		}
		// The killed member holds the group until its session times out;
		// only an empty group accepts offsets from outside.
		var err2 error
		for i := 0; i < 100; i++ {
			var resp kadm.OffsetResponses
			resp, err2 = adm.CommitOffsets(ctx, g, starts.Offsets())
			if err2 == nil {
				err2 = resp.Error()
			}
			if err2 == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := err2; err != nil {
			t.Fatalf("rewind group %s: %v", g, err)
		}
		p, err := s.sup.Start(ctx, s.specs[g])
		if err != nil {
			t.Fatalf("restart %s: %v", g, err)
		}
		if err := s.sup.WaitHealthy(ctx, p, 30*time.Second); err != nil {
			t.Fatalf("%s not healthy: %v", g, err)
		}
	}
	s.waitDrained(ctx)
	if got := s.snapshot(ctx); !maps.Equal(got, before) {
		t.Errorf("rewinding every consumer group changed the system:\n%s", diff(before, got))
	}
	final = s.settle(ctx, len(placed))
	s.verify(ctx, placed, final)
}

func (s *system) kafka(t testing.TB) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.env.DirectBrokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (s *system) pool(db string) *pgxpool.Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools == nil {
		s.pools = map[string]*pgxpool.Pool{}
	}
	if p := s.pools[db]; p != nil {
		return p
	}
	p, err := pgxpool.New(context.Background(), s.env.DirectDSN(db))
	if err != nil {
		s.t.Fatal(err)
	}
	s.pools[db] = p
	s.t.Cleanup(p.Close)
	return p
}

func (s *system) exec(ctx context.Context, db, sql string) {
	if _, err := s.pool(db).Exec(ctx, sql); err != nil {
		s.t.Fatalf("%s: %s: %v", db, sql, err)
	}
}

func (s *system) count(ctx context.Context, db, sql string) int64 {
	var n int64
	if err := s.pool(db).QueryRow(ctx, sql).Scan(&n); err != nil {
		s.t.Fatalf("%s: %s: %v", db, sql, err)
	}
	return n
}

// waitDrained waits until every outbox row is published and every group
// has committed up to the end of its topics.
func (s *system) waitDrained(ctx context.Context) {
	s.t.Helper()
	adm := kadm.NewClient(s.kafka(s.t))
	deadline := time.Now().Add(90 * time.Second)
	for {
		why := ""
		for _, db := range dbNames {
			if n := s.count(ctx, db, `SELECT count(*) FROM outbox WHERE published_at IS NULL`); n > 0 {
				why = fmt.Sprintf("%s has %d unpublished rows", db, n)
			}
		}
		for g, topics := range groups {
			if why != "" {
				break
			}
			ends, err := adm.ListEndOffsets(ctx, topics...)
			if err != nil {
				why = err.Error()
				break
			}
			committed, err := adm.FetchOffsetsForTopics(ctx, g, topics...)
			if err != nil {
				why = err.Error()
				break
			}
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := committed.Lookup(o.Topic, o.Partition)
				if o.Offset > 0 && (!ok || c.At < o.Offset) {
					why = fmt.Sprintf("group %s at %d of %d on %s/%d", g, c.At, o.Offset, o.Topic, o.Partition)
				}
			})
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not drained: %s\n%s", why, s.tails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshot counts everything a second effect would change.
func (s *system) snapshot(ctx context.Context) map[string]int64 {
	out := map[string]int64{
		"world.charges":   int64(len(s.world.Provider("gateway").Effects("charge"))),
		"world.refunds":   int64(len(s.world.Provider("gateway").Effects("refund"))),
		"world.shipments": int64(len(s.world.Provider("carrier").Effects("shipment"))),
		"world.emails":    int64(len(s.world.Provider("mailer").Effects("email"))),
	}
	for _, db := range dbNames {
		out[db+".inbox"] = s.count(ctx, db, `SELECT count(*) FROM inbox`)
		out[db+".outbox"] = s.count(ctx, db, `SELECT count(*) FROM outbox`)
	}
	out["inventory.available"] = s.count(ctx, "inventory", `SELECT coalesce(sum(available), 0) FROM stock`)
	out["inventory.reserved"] = s.count(ctx, "inventory", `SELECT coalesce(sum(reserved), 0) FROM stock`)
	out["orders.approved"] = s.count(ctx, "orders", `SELECT count(*) FROM orders WHERE status = 'APPROVED'`)
	out["orders.cancelled"] = s.count(ctx, "orders", `SELECT count(*) FROM orders WHERE status = 'CANCELLED'`)
	out["orders.trail"] = s.count(ctx, "orders", `SELECT coalesce(sum(cardinality(trail)), 0) FROM orders`)
	out["payment.rows"] = s.count(ctx, "payment", `SELECT count(*) FROM payments`)
	out["delivery.rows"] = s.count(ctx, "delivery", `SELECT count(*) FROM shipments`)
	return out
}

func diff(a, b map[string]int64) string {
	var sb strings.Builder
	for _, k := range sortedKeys(a) {
		if a[k] != b[k] {
			fmt.Fprintf(&sb, "  %s: %d → %d\n", k, a[k], b[k])
		}
	}
	return sb.String()
}

// The same redelivery against the non-idempotent-consumer mutant must
// change something: proof that the test above can fail.
func TestRedeliveryCatchesNonIdempotentConsumer(t *testing.T) {
	reqs, stock := workload("dupm", 30)
	s := startSystem(t, sysOpts{stock: stock, mutant: "non-idempotent-consumer"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	placed := s.placeAll(ctx, reqs, 4)
	s.settle(ctx, len(placed))
	s.waitDrained(ctx)
	before := s.snapshot(ctx)
	for _, db := range dbNames {
		s.exec(ctx, db, `UPDATE outbox SET published_at = NULL`)
	}
	s.waitDrained(ctx)
	got := s.snapshot(ctx)
	if maps.Equal(got, before) {
		t.Fatal("redelivering every message to non-idempotent consumers changed nothing: the redelivery test has no teeth")
	}
	t.Logf("the mutant's second effects:\n%s", diff(before, got))
}
