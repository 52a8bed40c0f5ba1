package observe

import (
	"context"
	"testing"

	"github.com/sagachaos/sagachaos/targets"
)

// An outbox published in the log has no published column: the observer
// fills it (and the row's record count in the log) from the log as it is
// after the rows were read, and follows the log as it grows.
func TestLogModeFillsPublishedFromTheLog(t *testing.T) {
	e := postgres(t)
	exec(t, e.DirectDSN("orders"), `DROP TABLE IF EXISTS cdc_outbox`,
		`CREATE TABLE cdc_outbox (id bigserial PRIMARY KEY, event_id text, aggregate_id text, seq bigint, type text, topic text)`,
		`INSERT INTO cdc_outbox (event_id, aggregate_id, seq, type, topic) VALUES ('e-1', 'o-1', 1, 'T', 'orders'), ('e-2', 'o-1', 2, 'T', 'orders'), ('e-3', 'o-2', 1, 'T', 'orders')`)
	c := newCluster(t, 2, "orders")
	cl := producer(t, c.ListenAddrs())
	produce(t, cl, envelope("orders", 0, "o-1", "T", "e-1", "1", `{}`), envelope("orders", 1, "o-2", "T", "e-3", "1", `{}`),
		envelope("orders", 0, "o-1", "T", "e-1", "1", `{}`)) // e-1 twice: a relay streamed it again
	q := targets.Query{DB: "orders", SQL: `SELECT id, event_id, aggregate_id, seq, type, topic FROM cdc_outbox ORDER BY id`, Published: targets.PublishedLog}
	tg, done := withLogTail(Target{DSN: e.DirectDSN, Brokers: c.ListenAddrs(), Topics: []string{"orders"}, Observe: targets.Observe{Outbox: []targets.Query{q}}, Logger: quiet})
	defer done()
	read := func() map[string][2]int64 {
		rows, err := query(context.Background(), tg, q, nil, "event_id", "published")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int64{}
		for _, r := range rows {
			d := decoder{r: r}
			ev, pub, n := d.str("event_id"), d.bool("published"), d.int(logRecords)
			if d.err != nil {
				t.Fatal(d.err)
			}
			p := int64(0)
			if pub {
				p = 1
			}
			out[ev] = [2]int64{p, n}
		}
		return out
	}
	got := read()
	if got["e-1"] != [2]int64{1, 2} || got["e-2"] != [2]int64{0, 0} || got["e-3"] != [2]int64{1, 1} {
		t.Fatalf("published, records: %v", got)
	}
	produce(t, cl, envelope("orders", 0, "o-1", "T", "e-2", "2", `{}`))
	if got := read(); got["e-2"] != [2]int64{1, 1} {
		t.Fatalf("after e-2 was published: %v", got)
	}
	// a column-mode query still needs its column
	if _, err := query(context.Background(), tg, targets.Query{DB: "orders", SQL: q.SQL}, nil, "event_id", "published"); err == nil {
		t.Fatal("a column-mode query without a published column was accepted")
	}
}
