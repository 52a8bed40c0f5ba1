package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rewindWait bounds how long a rewind waits for its groups to become
// empty: a stopped static member holds its group until its session times
// out.
const rewindWait = 20 * time.Second

// GroupRewinder rewinds the committed offsets of named consumer groups to
// the start of the log, so their next members redeliver everything. A
// broker refuses offset commits from outside an active group, which is why
// the rewind kind stops the group's members first.
type GroupRewinder struct {
	// Brokers are the brokers' direct addresses (not through a link).
	Brokers []string
}

// Rewind waits (up to 20s, and never past ctx) until every one of groups is
// empty, then commits offset 0 for each partition it has offsets for. It
// returns the groups it rewound, comma-separated; a group the broker does
// not know has nothing to rewind and is left out.
func (g *GroupRewinder) Rewind(ctx context.Context, groups []string) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Brokers...))
	if err != nil {
		return "", fmt.Errorf("rewind: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups = append([]string(nil), groups...)
	sort.Strings(groups)
	ctx, cancel := context.WithTimeout(ctx, rewindWait)
	defer cancel()
	var ready []string
	for {
		described, err := adm.DescribeGroups(ctx, groups...)
		if err != nil {
			return "", fmt.Errorf("rewind: describe groups %s: %w", strings.Join(groups, ","), err)
		}
		ready = nil
		var busy []string
		for _, name := range groups {
			switch d, ok := described[name]; {
			case !ok || d.State == "Dead" || errors.Is(d.Err, kerr.GroupIDNotFound):
				// Never joined: no committed offset to rewind.
			case d.State == "Empty":
				ready = append(ready, name)
			case d.Err != nil:
				busy = append(busy, name+" ("+d.Err.Error()+")")
			default:
				busy = append(busy, name+" ("+d.State+")")
			}
		}
		if len(busy) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("rewind: groups %s did not become empty: %w", strings.Join(busy, ", "), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	var done []string
	for _, name := range ready {
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
