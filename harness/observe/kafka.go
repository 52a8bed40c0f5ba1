package observe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
)

// maxPayload is the largest record value kept in an Event op: enough for
// any envelope payload, small enough that a 10,000-order history stays
// readable.
const maxPayload = 2 << 10

type partKey struct {
	topic string
	part  int32
}

// observeKafka reads every record of t.Topics from offset 0 to the high
// watermark taken at the start, records them in (topic, partition, offset)
// order and closes with one FKafkaSnapshot. Records already read are
// recorded even when the read fails part way: they are real; the snapshot
// then says Complete=false and why.
func observeKafka(ctx context.Context, rec *models.Recorder, t Target) {
	snap := models.KafkaSnapshot{Topics: append([]string{}, t.Topics...)}
	recs, err := readKafka(ctx, t)
	order := map[string]int{}
	for i, tp := range t.Topics {
		order[tp] = i
	}
	slices.SortFunc(recs, func(a, b event) int {
		return cmp.Or(cmp.Compare(order[a.Topic], order[b.Topic]), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	for _, ev := range recs {
		rec.Record(models.ProcObserver, models.Event, ev.typ, ev.aggregate, ev.EventRecord)
	}
	snap.Records = len(recs)
	snap.Complete = err == nil
	if err != nil {
		snap.Error = err.Error()
		t.logger().Warn("observe kafka incomplete", "records", len(recs), "err", err)
	}
	rec.Record(models.ProcObserver, models.State, models.FKafkaSnapshot, "", snap)
}

// readKafka consumes every partition of t.Topics from 0 to its end offset.
// It returns what it read, parsed (so that no fetch buffer stays alive), and,
// if it could not read everything, why.
func readKafka(ctx context.Context, t Target) ([]event, error) {
	if len(t.Topics) == 0 {
		return nil, nil
	}
	if len(t.Brokers) == 0 {
		return nil, errors.New("read kafka: no brokers")
	}
	timeout := t.KafkaTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(t.Brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("read kafka: admin client: %w", err)
	}
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, t.Topics...)
	var starts kadm.ListedOffsets
	if err == nil {
		starts, err = adm.ListStartOffsets(ctx, t.Topics...)
	}
	admCl.Close()
	if err != nil {
		return nil, fmt.Errorf("read kafka: list offsets of %s: %w", strings.Join(t.Topics, ","), err)
	}

	var problems []string
	want := map[partKey]int64{} // partition → end offset, for partitions with records
	consume := map[string]map[int32]kgo.Offset{}
	for _, tp := range t.Topics {
		parts, ok := ends[tp]
		if !ok {
			problems = append(problems, fmt.Sprintf("topic %s: not listed by the broker", tp))
			continue
		}
		for p, lo := range parts {
			if lo.Err != nil && p < 0 {
				// kadm's marker for a topic the broker does not have.
				problems = append(problems, fmt.Sprintf("topic %s: %v", tp, lo.Err))
				continue
			}
			if lo.Err != nil {
				problems = append(problems, fmt.Sprintf("topic %s partition %d: %v", tp, p, lo.Err))
				continue
			}
			if s, ok := starts.Lookup(tp, p); ok && s.Err == nil && s.Offset > 0 {
				// Retention or compaction removed the head of the log: what
				// is gone cannot be observed.
				problems = append(problems, fmt.Sprintf("topic %s partition %d: log starts at offset %d, not 0", tp, p, s.Offset))
			}
			if lo.Offset <= 0 {
				continue
			}
			want[partKey{tp, p}] = lo.Offset
			if consume[tp] == nil {
				consume[tp] = map[int32]kgo.Offset{}
			}
			consume[tp][p] = kgo.NewOffset().At(0)
		}
	}
	if len(want) == 0 {
		return nil, joinProblems(problems)
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(t.Brokers...),
		kgo.ConsumePartitions(consume),
		// Aborted transactional records never happened for a read_committed
		// consumer; control records are kept (and skipped below) so that
		// the end offset is always seen, even after a transaction marker.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxPartitionBytes(16<<20),
		kgo.MetadataMinAge(100*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("read kafka: consumer: %w", err)
	}
	defer cl.Close()

	var out []event
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(tp string, p int32, err error) {
			// kgo retries retriable errors itself; a reported one is
			// fatal for the partition.
			if _, ok := want[partKey{tp, p}]; ok {
				problems = append(problems, fmt.Sprintf("topic %s partition %d: fetch: %v", tp, p, err))
				delete(want, partKey{tp, p})
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			k := partKey{r.Topic, r.Partition}
			end, ok := want[k]
			if !ok || r.Offset >= end {
				return // past the end taken at the start: not part of the snapshot
			}
			if !r.Attrs.IsControl() {
				out = append(out, eventRecord(r, t.SeqFromOutbox))
			}
			if r.Offset+1 >= end {
				delete(want, k)
			}
		})
	}
	if len(want) > 0 {
		var left []string
		for k, end := range want {
			left = append(left, fmt.Sprintf("%s/%d (end %d)", k.topic, k.part, end))
		}
		slices.Sort(left)
		problems = append(problems, fmt.Sprintf("not read to the end within %v: %s", timeout, strings.Join(left, ", ")))
	}
	return out, joinProblems(problems)
}

func joinProblems(ps []string) error {
	if len(ps) == 0 {
		return nil
	}
	return fmt.Errorf("read kafka: %s", strings.Join(ps, "; "))
}

// event is an EventRecord plus the type and aggregate id headers, which go
// on the op rather than in the value.
type event struct {
	models.EventRecord
	typ, aggregate string
}

// eventRecord reads the envelope headers of r. A missing, repeated or
// unreadable header is named in Malformed; the op type is the type header
// (empty when missing) and the op's order the aggregate_id header.
//
// Without a seq header (seqOptional: the target's per-aggregate order is its
// outbox's), a missing seq is not a problem.
func eventRecord(r *kgo.Record, seqOptional bool) event {
	ev := event{EventRecord: models.EventRecord{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key),
	}}
	if !r.Timestamp.IsZero() {
		ev.Timestamp = r.Timestamp.UnixNano()
	}
	var problems []string
	hs := map[string]string{}
	for _, h := range r.Headers {
		if _, dup := hs[h.Key]; dup {
			if isEnvelope(h.Key) {
				problems = append(problems, "repeated header "+h.Key)
			}
			continue
		}
		hs[h.Key] = string(h.Value)
	}
	get := func(name string) string {
		v, ok := hs[name]
		if !ok || v == "" {
			problems = append(problems, "missing header "+name)
		}
		return v
	}
	ev.typ = get(models.HeaderType)
	ev.aggregate = get(models.HeaderAggregateID)
	ev.EventID = get(models.HeaderEventID)
	seqHeader := get
	if seqOptional {
		seqHeader = func(name string) string { return hs[name] }
	}
	if s := seqHeader(models.HeaderSeq); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			problems = append(problems, fmt.Sprintf("header seq %q is not a positive integer", s))
		} else {
			ev.Seq = n
		}
	}
	ev.Source = get(models.HeaderSource)
	ev.Malformed = strings.Join(problems, "; ")
	if len(r.Value) > 0 && len(r.Value) < maxPayload && json.Valid(r.Value) {
		ev.Payload = json.RawMessage(slices.Clone(r.Value))
	}
	return ev
}

func isEnvelope(h string) bool {
	switch h {
	case models.HeaderEventID, models.HeaderAggregateID, models.HeaderSeq, models.HeaderType, models.HeaderSource:
		return true
	}
	return false
}
