package observe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
)

// defaultLagWait bounds the wait for the consumer groups to catch up.
const defaultLagWait = 15 * time.Second

// lagStall ends the wait early when no group behind committed anything for
// this long: a consumer parked on a call that never returns will not catch
// up, and a consumer working through a backlog commits after every poll.
// When the quiesce stage proved every pending saga stuck (it stopped early:
// nothing moved for k step timeouts), a second of stillness is enough.
const (
	lagStall       = 5 * time.Second
	lagStallFrozen = time.Second
)

// groups returns the declared consumer groups, one per group id, in
// declaration order (replicas of one process share a group).
func groups(t Target) []models.ConsumerDecl {
	if t.Decl == nil {
		return nil
	}
	var out []models.ConsumerDecl
	for _, c := range t.Decl.Consumers {
		if c.Group == "" || slices.ContainsFunc(out, func(o models.ConsumerDecl) bool { return o.Group == c.Group }) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// observeOffsets is the no-lost-delivery wait (issue 12 item 1): it waits,
// bounded, until every declared consumer group has committed up to the end
// of every partition of its topics (no lag), then records each group's
// committed offsets and the ends as one FConsumerOffsets op. A record below
// a group's committed offset has been processed: by the contract, its
// applied record committed before the offset did. It runs before any
// applied snapshot is read. A group that never caught up — the wait ends at
// its bound, or once no group behind committed anything for lagStall — is
// recorded as it was last seen (LagFree false): records above its offsets
// are not judged.
func observeOffsets(ctx context.Context, rec *models.Recorder, t Target) {
	gs := groups(t)
	if len(gs) == 0 {
		return
	}
	wait := t.LagWait
	if wait <= 0 {
		wait = defaultLagWait
	}
	stall := lagStall
	if frozen(rec) {
		stall = lagStallFrozen
	}
	start := time.Now()
	deadline := start.Add(wait)
	var (
		last     map[string]models.ConsumerOffsets
		err      error
		progress = -1 // sum of committed offsets, to see the groups move
		moved    = start
	)
	for {
		last, err = readOffsets(ctx, t, gs)
		all := err == nil
		sum := 0
		for _, g := range gs {
			all = all && last[g.Group].LagFree
			for _, p := range last[g.Group].Partitions {
				sum += int(p.Committed)
			}
		}
		if sum != progress {
			progress, moved = sum, time.Now()
		}
		stalled := err == nil && time.Since(moved) >= stall
		if all || stalled || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	waited := time.Since(start).Milliseconds()
	for _, g := range gs {
		co, ok := last[g.Group]
		if !ok {
			co = models.ConsumerOffsets{Group: g.Group, Consumer: g.Consumer}
			if err != nil {
				co.Error = err.Error()
			} else {
				co.Error = "offsets not read"
			}
		}
		co.WaitedMS = waited
		if !co.LagFree {
			t.logger().Warn("consumer group had not caught up at observation", "group", g.Group, "err", co.Error)
		}
		rec.Record(models.ProcObserver, models.State, models.FConsumerOffsets, "", co)
	}
}

// readOffsets reads every group's committed offsets and the end offsets of
// its topics. A failure of one group is recorded in its Error.
func readOffsets(ctx context.Context, t Target, gs []models.ConsumerDecl) (map[string]models.ConsumerOffsets, error) {
	if len(t.Brokers) == 0 {
		return nil, errors.New("read offsets: no brokers")
	}
	timeout := t.KafkaTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.Brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("read offsets: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := map[string]models.ConsumerOffsets{}
	for _, g := range gs {
		co := models.ConsumerOffsets{Group: g.Group, Consumer: g.Consumer}
		ends, err := adm.ListEndOffsets(ctx, g.Topics...)
		if err == nil {
			err = ends.Error()
		}
		var committed kadm.OffsetResponses
		if err == nil {
			committed, err = adm.FetchOffsets(ctx, g.Group)
		}
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			co.Error = fmt.Sprintf("read offsets of group %s: %v", g.Group, err)
			out[g.Group] = co
			continue
		}
		co.LagFree = true
		ends.Each(func(lo kadm.ListedOffset) {
			c := int64(-1)
			if r, ok := committed.Lookup(lo.Topic, lo.Partition); ok {
				c = r.At
			}
			co.Partitions = append(co.Partitions, models.PartitionOffset{Topic: lo.Topic, Partition: lo.Partition, Committed: c, End: lo.Offset})
			if lo.Offset > 0 && c < lo.Offset {
				co.LagFree = false
			}
		})
		sort.Slice(co.Partitions, func(i, j int) bool {
			a, b := co.Partitions[i], co.Partitions[j]
			if a.Topic != b.Topic {
				return slices.Index(g.Topics, a.Topic) < slices.Index(g.Topics, b.Topic)
			}
			return a.Partition < b.Partition
		})
		out[g.Group] = co
	}
	return out, nil
}

// frozen reports whether the history's quiesce op says the wait stopped
// early because every pending saga was proven stuck.
func frozen(rec *models.Recorder) bool {
	ops := rec.Ops()
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Type == models.State && ops[i].F == models.FQuiesce {
			var q models.Quiesce
			return ops[i].Decode(&q) == nil && q.EarlyStop
		}
	}
	return false
}
