package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
)

func newRecorder(t *testing.T) *models.Recorder {
	t.Helper()
	rec, err := models.NewRecorder(nil, models.Header{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// newCluster starts a one-broker kfake cluster with the given topics of n
// partitions each.
func newCluster(t *testing.T, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func producer(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// envelope builds a record with the envelope headers; pairs of extra
// headers override or add.
func envelope(topic string, part int32, order, typ, eventID, seq, value string, extra ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: part, Key: []byte(order), Value: []byte(value)}
	hs := []kgo.RecordHeader{
		{Key: models.HeaderEventID, Value: []byte(eventID)},
		{Key: models.HeaderAggregateID, Value: []byte(order)},
		{Key: models.HeaderSeq, Value: []byte(seq)},
		{Key: models.HeaderType, Value: []byte(typ)},
		{Key: models.HeaderSource, Value: []byte("orders")},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: extra[i], Value: []byte(extra[i+1])})
	}
	r.Headers = hs
	return r
}

func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// eventLine renders an Event op for exact comparison.
func eventLine(t *testing.T, op models.Op) string {
	t.Helper()
	var ev models.EventRecord
	if err := op.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if op.Proc != models.ProcObserver {
		t.Fatalf("op %v: proc %q", op, op.Proc)
	}
	return fmt.Sprintf("%s %s/%d@%d key=%s order=%s f=%s id=%s seq=%d src=%s payload=%s malformed=%q",
		op.Type, ev.Topic, ev.Partition, ev.Offset, ev.Key, op.Order, op.F, ev.EventID, ev.Seq, ev.Source, ev.Payload, ev.Malformed)
}

func kafkaSnapshot(t *testing.T, op models.Op) models.KafkaSnapshot {
	t.Helper()
	if op.Type != models.State || op.F != models.FKafkaSnapshot {
		t.Fatalf("op %v is not the kafka snapshot", op)
	}
	var s models.KafkaSnapshot
	if err := op.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKafkaLogIsRecordedInTopicPartitionOffsetOrder(t *testing.T) {
	c := newCluster(t, 2, "orders.events", "inventory.events", "empty")
	brokers := c.ListenAddrs()
	cl := producer(t, brokers)
	big := `{"pad":"` + strings.Repeat("x", maxPayload) + `"}`
	// Produced out of order across topics and partitions: the history must
	// not depend on arrival order.
	produce(t, cl,
		envelope("inventory.events", 1, "o-2", "StockReserved", "e-9", "1", `{"sku":"sku-1"}`),
		envelope("orders.events", 1, "o-2", "OrderCreated", "e-3", "1", `not json`),
		envelope("orders.events", 0, "o-1", "OrderCreated", "e-1", "1", `{"total": 2500}`),
		envelope("orders.events", 0, "o-1", "OrderCreated", "e-1", "1", `{"total": 2500}`), // redelivered duplicate: both kept
		envelope("orders.events", 1, "o-2", "OrderApproved", "e-4", "abc", big),
	)
	produce(t, cl,
		&kgo.Record{Topic: "orders.events", Partition: 0, Key: []byte("o-1"), Value: []byte(`{}`)}, // no envelope at all
		envelope("orders.events", 0, "o-1", "OrderCancelled", "e-2", "2", `{}`, models.HeaderType, "Other"),
	)
	// A transaction that was aborted never happened for a read_committed
	// reader; the committed one after it did, and the markers must not
	// stall the read.
	tx := producer(t, brokers, kgo.TransactionalID("observe-test"))
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		id := map[kgo.TransactionEndTry]string{kgo.TryAbort: "e-aborted", kgo.TryCommit: "e-10"}[commit]
		produce(t, tx, envelope("inventory.events", 0, "o-3", "StockReleased", id, "1", `{}`))
		if err := tx.EndTransaction(context.Background(), commit); err != nil {
			t.Fatal(err)
		}
	}

	rec := newRecorder(t)
	observeKafka(context.Background(), rec, Target{Brokers: brokers, Topics: []string{"orders.events", "inventory.events", "empty"}})
	ops := rec.Ops()
	var got []string
	for _, op := range ops[:len(ops)-1] {
		got = append(got, eventLine(t, op))
	}
	want := []string{
		// inventory.events/0: aborted record @0, abort marker @1, committed
		// record @2, commit marker @3.
		`event orders.events/0@0 key=o-1 order=o-1 f=OrderCreated id=e-1 seq=1 src=orders payload={"total":2500} malformed=""`,
		`event orders.events/0@1 key=o-1 order=o-1 f=OrderCreated id=e-1 seq=1 src=orders payload={"total":2500} malformed=""`,
		`event orders.events/0@2 key=o-1 order= f= id= seq=0 src= payload={} malformed="missing header type; missing header aggregate_id; missing header event_id; missing header seq; missing header source"`,
		`event orders.events/0@3 key=o-1 order=o-1 f=OrderCancelled id=e-2 seq=2 src=orders payload={} malformed="repeated header type"`,
		`event orders.events/1@0 key=o-2 order=o-2 f=OrderCreated id=e-3 seq=1 src=orders payload= malformed=""`,
		`event orders.events/1@1 key=o-2 order=o-2 f=OrderApproved id=e-4 seq=0 src=orders payload= malformed="header seq \"abc\" is not a positive integer"`,
		`event inventory.events/0@2 key=o-3 order=o-3 f=StockReleased id=e-10 seq=1 src=orders payload={} malformed=""`,
		`event inventory.events/1@0 key=o-2 order=o-2 f=StockReserved id=e-9 seq=1 src=orders payload={"sku":"sku-1"} malformed=""`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	snap := kafkaSnapshot(t, ops[len(ops)-1])
	if !snap.Complete || snap.Records != len(want) || snap.Error != "" ||
		!slices.Equal(snap.Topics, []string{"orders.events", "inventory.events", "empty"}) {
		t.Fatalf("snapshot %+v", snap)
	}
}

func TestKafkaFailuresAreIncompleteSnapshots(t *testing.T) {
	c := newCluster(t, 1, "events")
	produce(t, producer(t, c.ListenAddrs()), envelope("events", 0, "o-1", "OrderCreated", "e-1", "1", `{}`))
	cases := []struct {
		name    string
		target  Target
		events  int
		errPart string
	}{
		{"no brokers", Target{Topics: []string{"events"}}, 0, "no brokers"},
		{"unknown topic", Target{Brokers: c.ListenAddrs(), Topics: []string{"events", "nope"}}, 1, "topic nope"},
		{"unreachable broker", Target{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"events"}, KafkaTimeout: 500 * time.Millisecond}, 0, "list offsets"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			observeKafka(context.Background(), rec, tc.target)
			ops := rec.Ops()
			if len(ops) != tc.events+1 {
				t.Fatalf("%d ops, want %d events and a snapshot: %v", len(ops), tc.events, ops)
			}
			snap := kafkaSnapshot(t, ops[len(ops)-1])
			if snap.Complete || snap.Records != tc.events || !strings.Contains(snap.Error, tc.errPart) {
				t.Fatalf("snapshot %+v, want incomplete, %d records, error containing %q", snap, tc.events, tc.errPart)
			}
		})
	}
}

func TestNoTopicsIsAnEmptyCompleteSnapshot(t *testing.T) {
	rec := newRecorder(t)
	observeKafka(context.Background(), rec, Target{})
	ops := rec.Ops()
	b, _ := json.Marshal(kafkaSnapshot(t, ops[0]))
	if len(ops) != 1 || string(b) != `{"topics":[],"records":0,"complete":true}` {
		t.Fatalf("ops %v", ops)
	}
}

// BenchmarkObserveKafka reads a 100,000-record log (about what a
// 10,000-order run leaves) into a history written to io.Discard.
func BenchmarkObserveKafka(b *testing.B) {
	const n = 100_000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		r := envelope("events", 0, fmt.Sprintf("o-%d", i/10), "StockReserved", fmt.Sprintf("e-%d", i), fmt.Sprint(i%10+1), `{"sku":"sku-1","qty":2}`)
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	cl.Close()
	b.ResetTimer()
	for b.Loop() {
		rec, _ := models.NewRecorder(io.Discard, models.Header{})
		observeKafka(context.Background(), rec, Target{Brokers: c.ListenAddrs(), Topics: []string{"events"}})
		if got := rec.Len(); got != n+1 {
			b.Fatalf("%d ops, want %d", got, n+1)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// What the observer cannot see it must say: a log whose head was deleted,
// and a partition it cannot read to the end (an open transaction holds
// read_committed readers back) within its time bound.
func TestKafkaGapsAreNamed(t *testing.T) {
	c := newCluster(t, 1, "trimmed", "stuck")
	brokers := c.ListenAddrs()
	cl := producer(t, brokers)
	for i := range 3 {
		produce(t, cl, envelope("trimmed", 0, "o-1", "OrderCreated", fmt.Sprintf("e-%d", i), fmt.Sprint(i+1), `{}`))
	}
	produce(t, cl, envelope("stuck", 0, "o-2", "OrderCreated", "e-s", "1", `{}`))
	var dr kadm.Offsets
	dr.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 1})
	if _, err := kadm.NewClient(cl).DeleteRecords(context.Background(), dr); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	tx := producer(t, brokers, kgo.TransactionalID("left-open"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, tx, envelope("stuck", 0, "o-2", "OrderApproved", "e-open", "2", `{}`))

	rec := newRecorder(t)
	observeKafka(context.Background(), rec, Target{Brokers: brokers, Topics: []string{"trimmed", "stuck"}, KafkaTimeout: 500 * time.Millisecond, Logger: quiet})
	ops := rec.Ops()
	var got []string
	for _, op := range ops[:len(ops)-1] {
		var ev models.EventRecord
		op.Decode(&ev)
		got = append(got, fmt.Sprintf("%s/%d@%d %s", ev.Topic, ev.Partition, ev.Offset, ev.EventID))
	}
	if want := []string{"trimmed/0@1 e-1", "trimmed/0@2 e-2", "stuck/0@0 e-s"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	snap := kafkaSnapshot(t, ops[len(ops)-1])
	if snap.Complete || snap.Records != 3 ||
		!strings.Contains(snap.Error, "topic trimmed partition 0: log starts at offset 1") ||
		!strings.Contains(snap.Error, "not read to the end within 500ms: stuck/0 (end 2)") {
		t.Fatalf("snapshot %+v", snap)
	}
}
