// Package consumer runs an idempotent Kafka consumer for one service.
//
// Each handled message is applied in one local transaction that also
// inserts its processed-message (inbox) row and any outgoing outbox rows;
// a redelivered message finds its inbox row and has no second effect.
// Offsets are committed only after the records of a poll were all handled
// (autocommit off), so a crash anywhere before that redelivers, never
// loses. Records of one partition are handled in order; partitions are
// handled in parallel.
//
// Liveness: each consumer joins its group as a static member named after
// its instance (SAGACHAOS_INSTANCE), so a restarted process takes over the
// membership of the incarnation it replaces at once. With dynamic member
// IDs a SIGKILLed incarnation lingers in the group; if it dies while
// waiting in JoinGroup, the broker (kfake at least) never arms its session
// timer, the next generation assigns it partitions, and those partitions
// are never consumed again. Every handler attempt and every offset commit
// also runs under its own deadline, so a call on a dead connection cannot
// hold the poll loop (and with BlockRebalanceOnPoll the group) forever.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
)

// Envelope is one received message: its headers and raw JSON value.
type Envelope struct {
	EventID     string
	AggregateID string
	Seq         int64
	Type        string
	Source      string
	Value       []byte
}

// Handler applies one message. It must be idempotent through the inbox
// (see Claim) and return an error to have the message retried.
type Handler func(ctx context.Context, e Envelope) error

// Config configures Run.
type Config struct {
	Brokers string
	Group   string
	Topics  []string
	// Types are the message types this consumer handles; others are
	// skipped without an inbox row.
	Types   map[string]bool
	Handler Handler
	Log     *slog.Logger
	// SessionTimeout bounds how long a killed member holds its partitions.
	SessionTimeout time.Duration
	// AfterCommit, when set, runs once the offsets of a poll are committed
	// (tests and failpoints use it).
	AfterCommit func()
	// InstanceID makes the member static; a new incarnation with the same
	// ID replaces the old member instead of sharing partitions with its
	// corpse. Empty means svc.Instance() (SAGACHAOS_INSTANCE); if that is
	// unset too the member is dynamic. Two live processes must never share
	// an ID: the broker fences one of them.
	InstanceID string
	// AttemptTimeout bounds one handler attempt (default 10s); a timed-out
	// attempt is retried like any failed one.
	AttemptTimeout time.Duration
	// ExtraOpts are appended to the client options (tests route the
	// client through a dialer they can cut).
	ExtraOpts []kgo.Opt
	// SkipFailed is the skip-failed-message planted bug: a handler that
	// fails is not retried; the message is logged and skipped, and the
	// poll's offsets are committed as if it had been applied.
	SkipFailed bool
}

// commitTimeout bounds one offset-commit attempt.
const commitTimeout = 5 * time.Second

// Run consumes until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = time.Second
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 10 * time.Second
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = svc.Instance()
	}
	opts := append(svc.KafkaOpts(cfg.Brokers),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.SessionTimeout/10),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	opts = append(opts, cfg.ExtraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", cfg.Group, err)
	}
	defer cl.Close()
	// With BlockRebalanceOnPoll, a poll cut short by ctx still blocks
	// rebalances, and Close (which leaves the group) waits for them to be
	// allowed: without this, shutdown hangs forever.
	defer cl.AllowRebalance()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				cfg.Log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		var wg sync.WaitGroup
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range p.Records {
					handleWithRetry(ctx, cfg, r)
				}
			}()
		})
		wg.Wait()
		if ctx.Err() != nil {
			break
		}
		for n := 0; ; n++ {
			cctx, cancel := context.WithTimeout(ctx, commitTimeout)
			err := cl.CommitUncommittedOffsets(cctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			cfg.Log.Warn("commit offsets", "err", err)
			svc.Backoff(ctx, n)
			if n > 20 {
				break // the records will be redelivered; the inbox makes that harmless
			}
		}
		if cfg.AfterCommit != nil {
			cfg.AfterCommit()
		}
		cl.AllowRebalance()
	}
	return nil
}

func handleWithRetry(ctx context.Context, cfg Config, r *kgo.Record) {
	e, err := Decode(r)
	if err != nil {
		cfg.Log.Error("skip malformed record", "topic", r.Topic, "offset", r.Offset, "err", err)
		return
	}
	if !cfg.Types[e.Type] {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		actx, cancel := context.WithTimeout(ctx, cfg.AttemptTimeout)
		err := cfg.Handler(actx, e)
		cancel()
		if err == nil {
			return
		}
		if cfg.SkipFailed {
			// Planted bug (skip-failed-message): log and move on.
			cfg.Log.Error("handle message failed, skipped", "type", e.Type, "order", e.AggregateID, "event_id", e.EventID, "err", err)
			return
		}
		cfg.Log.Warn("handle message, will retry", "type", e.Type, "order", e.AggregateID, "event_id", e.EventID, "attempt", n+1, "err", err)
		svc.Backoff(ctx, n)
	}
}

// Decode reads the envelope headers of a record.
func Decode(r *kgo.Record) (Envelope, error) {
	e := Envelope{Value: r.Value}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case models.HeaderEventID:
			e.EventID = v
		case models.HeaderAggregateID:
			e.AggregateID = v
		case models.HeaderType:
			e.Type = v
		case models.HeaderSource:
			e.Source = v
		case models.HeaderSeq:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return e, fmt.Errorf("header seq %q: %w", v, err)
			}
			e.Seq = n
		}
	}
	if e.EventID == "" || e.AggregateID == "" || e.Type == "" {
		return e, fmt.Errorf("missing envelope headers (event_id=%q aggregate_id=%q type=%q)", e.EventID, e.AggregateID, e.Type)
	}
	return e, nil
}

// Claim inserts the inbox row for e inside tx. It returns false when the
// message was already processed: the caller must then apply nothing.
func Claim(ctx context.Context, tx pgx.Tx, consumerName string, e Envelope) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO inbox (consumer, event_id, aggregate_id, source, type, seq)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, event_id) DO NOTHING`,
		consumerName, e.EventID, e.AggregateID, e.Source, e.Type, e.Seq)
	if err != nil {
		return false, fmt.Errorf("inbox insert %s: %w", e.EventID, err)
	}
	if mutant.Is(mutant.NonIdempotentConsumer) {
		return true, nil // planted bug: a redelivery is applied again
	}
	return tag.RowsAffected() == 1, nil
}

// Seen reports whether e was already processed, so a consumer can skip a
// world call for a redelivered message. It is an optimisation only: Claim
// inside the transaction is what guarantees a single effect.
func Seen(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, consumerName string, e Envelope) (bool, error) {
	if mutant.Is(mutant.NonIdempotentConsumer) {
		return false, nil
	}
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM inbox WHERE consumer = $1 AND event_id = $2`, consumerName, e.EventID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inbox lookup %s: %w", e.EventID, err)
	}
	return true, nil
}
