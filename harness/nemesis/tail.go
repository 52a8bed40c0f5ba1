package nemesis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
)

// Tail reads the target's topics from the start, directly from the
// brokers (not through any component's link, so no fault slows it), and
// hands every record's type header to ev: the record triggers' events.
// A fetch waits at most 20 ms, so a record is counted ~10–50 ms after it
// was produced. Stop ends the tail; it is idempotent.
type Tail struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// StartTail starts tailing topics on brokers into ev. With no brokers or
// topics it tails nothing (record triggers then never fire, and are
// journaled as skipped).
func StartTail(brokers, topics []string, ev *Events, log *slog.Logger) (*Tail, error) {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Tail{cancel: cancel}
	if len(brokers) == 0 || len(topics) == 0 || ev == nil {
		return t, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(20*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	if err != nil {
		cancel()
		return nil, err
	}
	t.wg.Go(func() {
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && log != nil {
					log.Debug("nemesis tail: fetch error", "topic", topic, "partition", p, "err", err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == models.HeaderType {
						ev.ObserveRecord(r.Topic, string(h.Value), r.Partition, r.Offset)
						break
					}
				}
			})
		}
	})
	return t, nil
}

// Stop ends the tail and waits for it.
func (t *Tail) Stop() {
	if t == nil {
		return
	}
	t.once.Do(t.cancel)
	t.wg.Wait()
}
