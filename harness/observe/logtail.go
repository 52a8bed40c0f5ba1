package observe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// An outbox query with "published": "log" (a CDC relay's outbox, which
// nothing marks) has no published column: a row is published once its
// event_id is in the Kafka log. The observer then fills the column itself,
// from a tail of the log read up to its end after the rows were read, so
// every wait and snapshot that reads "published" works unchanged and a row
// counts as published exactly when the log already had it. It also fills
// logRecords, how many records of the row the log holds (a relay that
// streams a transaction again after a crash appends duplicates): the sum
// over an outbox's rows grows whenever its relay publishes anything, new
// or again, which is how a wait tells a relay working through a backlog of
// duplicates from one that publishes nothing.

// logTail follows every topic of the run from offset 0 and remembers the
// event ids it has read.
type logTail struct {
	brokers []string
	topics  []string

	mu     sync.Mutex
	adm    *kadm.Client
	admc   *kgo.Client
	cl     *kgo.Client
	pos    map[partKey]int64 // next offset to read
	copies map[string]int    // event id → records in the log
}

// logRecords is the column fillPublished adds: the row's records in the log.
const logRecords = "log_records"

// logMode reports whether q's rows are published once in the log.
func logMode(q targets.Query) bool { return q.Published == targets.PublishedLog }

// withLogTail gives t a log tail when one of its outbox queries needs it;
// close releases it.
func withLogTail(t Target) (Target, func()) {
	if t.tail != nil || !slices.ContainsFunc(t.Observe.Outbox, logMode) {
		return t, func() {}
	}
	t.tail = &logTail{brokers: t.Brokers, topics: t.Topics, pos: map[partKey]int64{}, copies: map[string]int{}}
	return t, t.tail.close
}

// logColumns drops "published" from the columns a log-mode query must
// return: the observer fills it.
func logColumns(q targets.Query, cols []string) ([]string, bool) {
	if !logMode(q) || !slices.Contains(cols, "published") {
		return cols, false
	}
	return slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == "published" }), true
}

// fillPublished sets every row's published column (its event_id is in the
// log as it is now, read to its end after the rows were read) and its
// logRecords.
func (t Target) fillPublished(ctx context.Context, q targets.Query, rows []row) error {
	if t.tail == nil {
		return fmt.Errorf("query %s: published comes from the log, but the observer follows no log", q.DB)
	}
	if err := t.tail.sync(ctx); err != nil {
		return fmt.Errorf("query %s: published from the log: %w", q.DB, err)
	}
	for _, r := range rows {
		id, err := r.str("event_id")
		if err != nil {
			return err
		}
		n := t.tail.records(id)
		r["published"], r[logRecords] = n > 0, int64(n)
	}
	return nil
}

// records is how many records with event id id the log held at the last
// sync.
func (l *logTail) records(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == "" {
		return 0
	}
	return l.copies[id]
}

func (l *logTail) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cl != nil {
		l.cl.Close()
		l.cl = nil
	}
	if l.admc != nil {
		l.admc.Close()
		l.admc = nil
	}
}

// sync reads every partition up to the end offsets it has now.
func (l *logTail) sync(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.topics) == 0 {
		return nil
	}
	if len(l.brokers) == 0 {
		return errors.New("no brokers")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if l.admc == nil {
		c, err := kgo.NewClient(kgo.SeedBrokers(l.brokers...), kgo.MetadataMinAge(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("admin client: %w", err)
		}
		l.admc, l.adm = c, kadm.NewClient(c)
	}
	ends, err := l.adm.ListEndOffsets(ctx, l.topics...)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	want := map[partKey]int64{}
	parts := map[string]map[int32]kgo.Offset{}
	var bad []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			bad = append(bad, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		k := partKey{o.Topic, o.Partition}
		if parts[o.Topic] == nil {
			parts[o.Topic] = map[int32]kgo.Offset{}
		}
		parts[o.Topic][o.Partition] = kgo.NewOffset().At(0)
		if o.Offset > l.pos[k] {
			want[k] = o.Offset
		}
	})
	if len(bad) > 0 {
		return errors.Join(bad...)
	}
	if len(want) == 0 {
		return nil
	}
	if l.cl == nil {
		c, err := kgo.NewClient(
			kgo.SeedBrokers(l.brokers...),
			kgo.ConsumePartitions(parts),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.MetadataMinAge(100*time.Millisecond),
		)
		if err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		l.cl = c
	}
	for len(want) > 0 {
		fs := l.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("log not read to its end: %w", ctx.Err())
		}
		var ferr error
		fs.EachError(func(tp string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", tp, p, err) })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := partKey{r.Topic, r.Partition}
			l.pos[k] = r.Offset + 1
			if !r.Attrs.IsControl() {
				for _, h := range r.Headers {
					if h.Key == models.HeaderEventID {
						l.copies[string(h.Value)]++
					}
				}
			}
			if end, ok := want[k]; ok && r.Offset+1 >= end {
				delete(want, k)
			}
		})
	}
	return nil
}
