package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sagachaos/sagachaos/models"
)

// cutDialer is the network of one process incarnation: kill closes every
// connection and refuses new ones, which is all a broker sees of a SIGKILL.
type cutDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *cutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("incarnation killed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *cutDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// handled records which partitions a trial's consumers have handled a
// record of, per batch.
type handled struct {
	mu   sync.Mutex
	seen map[string]bool // "batch/partition"
}

func (h *handled) handler(_ context.Context, e Envelope) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[e.EventID] = true
	return nil
}

func (h *handled) missing(batch, partitions int) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	for p := 0; p < partitions; p++ {
		if !h.seen[fmt.Sprintf("%d/%d", batch, p)] {
			out = append(out, p)
		}
	}
	return out
}

// TestRestartAfterKillDuringJoinKeepsConsuming replays what the harness
// found with consumer-crash: an incarnation is SIGKILLed, the next one is
// killed while it waits in JoinGroup, and a third starts. With dynamic
// member IDs the broker put the dead second incarnation into the next
// generation without a session timer (kfake arms it only when the join
// reply is delivered), so the partitions the leader gave it were never
// consumed again. The survivor must end up consuming every partition.
// Several groups run at once because, with dynamic IDs, which member leads
// that generation is a coin flip and only a surviving leader gets stuck.
func TestRestartAfterKillDuringJoinKeepsConsuming(t *testing.T) {
	const (
		trials     = 4
		partitions = 4
	)
	topics := make([]string, trials)
	for i := range topics {
		topics[i] = "orders-" + strconv.Itoa(i)
	}
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(partitions, topics...),
	)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()[0]

	// Signal each trial when its group receives a JoinGroup that puts a
	// member into the group (known member ID, or a static instance), so
	// the test kills the second incarnation exactly while it joins.
	var joinMu sync.Mutex
	joinWatch := map[string]chan struct{}{}
	cluster.ControlKey(int16(kmsg.JoinGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.JoinGroupRequest)
		if req.MemberID != "" || req.InstanceID != nil {
			joinMu.Lock()
			if ch, ok := joinWatch[req.Group]; ok {
				close(ch)
				delete(joinWatch, req.Group)
			}
			joinMu.Unlock()
		}
		return nil, nil, false
	})

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer prod.Close()
	produce := func(ctx context.Context, topic string, batch int) error {
		for p := 0; p < partitions; p++ {
			id := fmt.Sprintf("%d/%d", batch, p)
			r := &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("{}"), Headers: []kgo.RecordHeader{
				{Key: models.HeaderEventID, Value: []byte(id)},
				{Key: models.HeaderAggregateID, Value: []byte("o-" + id)},
				{Key: models.HeaderType, Value: []byte("Test")},
			}}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("produce %s to %s: %w", id, topic, err)
			}
		}
		return nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var wg sync.WaitGroup
	errs := make([]error, trials)
	for i := 0; i < trials; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = liveTrial(ctx, log, brokers, topics[i], "g-"+topics[i], partitions, produce, func() chan struct{} {
				ch := make(chan struct{})
				joinMu.Lock()
				joinWatch["g-"+topics[i]] = ch
				joinMu.Unlock()
				return ch
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("trial %d: %v", i, err)
		}
	}
}

// liveTrial runs three incarnations of one consumer instance in one group
// and reports the partitions of the last batch the survivor never handled.
func liveTrial(ctx context.Context, log *slog.Logger, brokers, topic, group string, partitions int,
	produce func(context.Context, string, int) error, watchJoin func() chan struct{}) error {
	h := &handled{seen: map[string]bool{}}
	var hung atomic.Bool
	start := func() (kill func()) {
		d := &cutDialer{}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(cctx, Config{
				Brokers: brokers, Group: group, Topics: []string{topic},
				Types: map[string]bool{"Test": true}, Handler: h.handler, Log: log,
				SessionTimeout: time.Second,
				// Every incarnation is the same instance restarted, as
				// under the harness (SAGACHAOS_INSTANCE).
				InstanceID: group + "-instance",
				ExtraOpts:  []kgo.Opt{kgo.Dialer(d.DialContext)},
			})
		}()
		return func() {
			d.kill()
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				hung.Store(true) // reported by the caller; never wait forever
			}
		}
	}
	waitAll := func(batch int, bound time.Duration) error {
		deadline := time.Now().Add(bound)
		for {
			miss := h.missing(batch, partitions)
			if len(miss) == 0 {
				return nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				sort.Ints(miss)
				return fmt.Errorf("batch %d: partitions %v of %s never handled after %v: a dead incarnation still owns them", batch, miss, topic, bound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	kill1 := start()
	if err := produce(ctx, topic, 1); err != nil {
		return err
	}
	if err := waitAll(1, 30*time.Second); err != nil {
		return fmt.Errorf("first incarnation: %w", err)
	}
	kill1()

	joined := watchJoin()
	kill2 := start()
	select {
	case <-joined:
	case <-ctx.Done():
		return fmt.Errorf("second incarnation never sent JoinGroup: %w", ctx.Err())
	}
	kill2()

	kill3 := start()
	if err := produce(ctx, topic, 2); err != nil {
		kill3()
		return err
	}
	// The bound is a liveness bound, not a speed claim: a dead member's
	// session (1s) and rebalance (5s) timeouts fit in it many times over.
	err := waitAll(2, 30*time.Second)
	kill3()
	if hung.Load() {
		err = errors.Join(err, errors.New("Run did not return within 20s of its context ending (Close blocked?)"))
	}
	return err
}
