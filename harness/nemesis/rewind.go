package nemesis

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupRewinder rewinds the committed offsets of every consumer group that
// has no live member to the start of the log, so the next member redelivers
// everything. A broker refuses offset commits from outside an active group,
// which is why the nemesis stops the component first.
type GroupRewinder struct {
	// Brokers are the brokers' direct addresses (not through a link).
	Brokers []string
}

// Rewind rewinds the groups that are empty now, waiting (up to 20s) for one
// to become empty. It returns the groups it rewound, comma-separated.
func (g *GroupRewinder) Rewind(ctx context.Context) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Brokers...))
	if err != nil {
		return "", fmt.Errorf("rewind: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(20 * time.Second)
	for {
		groups, err := adm.DescribeGroups(ctx)
		if err != nil {
			return "", fmt.Errorf("rewind: describe groups: %w", err)
		}
		var empty []string
		for name, d := range groups {
			if d.State == "Empty" {
				empty = append(empty, name)
			}
		}
		sort.Strings(empty)
		if len(empty) > 0 {
			var done []string
			for _, name := range empty {
				offs, err := adm.FetchOffsets(ctx, name)
				if err != nil {
					return strings.Join(done, ","), fmt.Errorf("rewind: fetch offsets of %s: %w", name, err)
				}
				to := kadm.Offsets{}
				offs.Each(func(o kadm.OffsetResponse) {
					to.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: 0, LeaderEpoch: -1})
				})
				resp, err := adm.CommitOffsets(ctx, name, to)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					return strings.Join(done, ","), fmt.Errorf("rewind: commit offsets of %s: %w", name, err)
				}
				done = append(done, name)
			}
			return strings.Join(done, ","), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("rewind: no consumer group became empty within 20s (session timeouts too long?)")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
