// Package relay publishes outbox rows to Kafka.
//
// Any number of relay processes compete, each polling every service
// database. One poll is one local transaction:
//
//  1. Find the aggregates (orders) with unpublished rows, oldest first.
//  2. Try to take a transaction-scoped advisory lock on each of them
//     (pg_try_advisory_xact_lock, never waiting): this is SKIP LOCKED at
//     the level of an aggregate. An aggregate is owned by at most one relay
//     at a time; the others skip it.
//  3. In a new statement (so its snapshot includes everything the previous
//     owner committed), read the owned aggregates' unpublished rows in id
//     order with a LIMIT, FOR UPDATE.
//  4. Produce them, per aggregate in seq order, with key = order id (one
//     partition per order), and wait for the broker's acks. The producer is
//     idempotent, so a retried batch is not reordered within a partition.
//  5. Mark the acknowledged rows published and commit. A crash between 4
//     and 5 republishes them: duplicates are legal (consumers dedupe by
//     event_id), loss and reordering are not.
//
// Why not a single "SELECT … FOR UPDATE SKIP LOCKED" over rows: a second
// relay would skip seq k (locked by the first) and take seq k+1, and could
// publish it first. Why not the advisory lock inside that single SELECT's
// WHERE: the lock is tried row by row during the scan, so a relay can be
// refused rows k…k+6 while the owner still holds the aggregate, then be
// granted the lock at row k+7 once the owner committed rows k-… and skip
// ahead. TestCompetingRelaysKeepPerAggregateOrder caught exactly that;
// trying each aggregate's lock once, before reading any row, closes it.
//
// Per-aggregate seq is assigned under a row lock (see package outbox), so a
// row with seq k is never visible before seq k-1 has committed: no gap in
// an aggregate's unpublished rows, and ids (which do have gaps and commit
// out of order across aggregates) are only used to find old rows first.
//
// Cleanup deletes published rows older than the retention, never an
// unpublished one.
package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
)

// Source is one database the relay drains.
type Source struct {
	Name string
	Pool *pgxpool.Pool
}

// Config configures Run.
type Config struct {
	Sources   []Source
	Client    *kgo.Client
	Batch     int
	Interval  time.Duration // idle poll interval
	Retention time.Duration
	// CleanupEvery is how often published rows past Retention are deleted.
	CleanupEvery time.Duration
	Log          *slog.Logger
}

// ParseDatabases reads RELAY_DATABASES ("orders=URL inventory=URL").
func ParseDatabases(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		name, url, ok := strings.Cut(f, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("RELAY_DATABASES entry %q: want name=URL", f)
		}
		out[name] = url
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("RELAY_DATABASES is empty")
	}
	return out, nil
}

// Run drains every source until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	var wg sync.WaitGroup
	for _, s := range cfg.Sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The first cleanup waits one interval: a (re)started relay
			// publishes before it deletes anything.
			lastClean := time.Now()
			for n := 0; ctx.Err() == nil; {
				moved, err := Poll(ctx, cfg, s)
				if err != nil {
					if ctx.Err() == nil {
						cfg.Log.Warn("relay poll", "db", s.Name, "err", err)
					}
					svc.Backoff(ctx, n)
					n++
					continue
				}
				n = 0
				if time.Since(lastClean) >= cfg.CleanupEvery {
					if err := Cleanup(ctx, s.Pool, cfg.Retention); err != nil {
						cfg.Log.Warn("outbox cleanup", "db", s.Name, "err", err)
					}
					lastClean = time.Now()
				}
				if moved == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(cfg.Interval):
					}
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

type row struct {
	id      int64
	eventID string
	agg     string
	seq     int64
	typ     string
	topic   string
	source  string
	payload []byte
}

// candidatesSQL finds aggregates with unpublished rows, oldest first.
const candidatesSQL = `SELECT aggregate_id FROM outbox WHERE published_at IS NULL
GROUP BY aggregate_id ORDER BY min(id) LIMIT $1`

// lockSQL takes the transaction-scoped aggregate locks it can get, without
// waiting: SKIP LOCKED at the level of an aggregate. Each aggregate's lock
// is tried exactly once, in its own statement, before any row is read.
const lockSQL = `SELECT a FROM unnest($1::text[]) AS a
WHERE pg_try_advisory_xact_lock(hashtextextended('outbox:' || a, 0))`

// rowsSQL reads the owned aggregates' unpublished rows. Its snapshot is
// taken after the locks were granted, so it sees everything the previous
// owner committed; ORDER BY id with a LIMIT takes a prefix of each
// aggregate's rows. Plain FOR UPDATE (not SKIP LOCKED): nobody else may
// hold these rows, and skipping one would leave a hole in an aggregate.
const rowsSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, source, payload::text
FROM outbox
WHERE published_at IS NULL AND aggregate_id = ANY($1::text[])
ORDER BY id
LIMIT $2
FOR UPDATE`

// Without the aggregate lock (the parallel-relay-reorder mutant): rows are
// spread over relays by SKIP LOCKED alone.
const selectNoAggLockSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, source, payload::text
FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`

// The relay-id-cursor mutant finds work above a high-water mark of the ids
// it has published (the classic `WHERE id > last_id` poller): ids are taken
// at insert and commit out of order across aggregates, so a row whose id
// is below the mark when it commits is never a candidate again. Its
// aggregate's later rows still bring it along (rowsSQL reads all of an
// owned aggregate's unpublished rows), so what stays behind for good is an
// aggregate's last row — the order saga's terminal events.
const candidatesCursorSQL = `SELECT aggregate_id FROM outbox WHERE published_at IS NULL AND id > $2
GROUP BY aggregate_id ORDER BY min(id) LIMIT $1`

var (
	cursorMu sync.Mutex
	cursors  = map[string]int64{} // source -> highest id published by this process
)

func cursorOf(source string) int64 {
	cursorMu.Lock()
	defer cursorMu.Unlock()
	return cursors[source]
}

func advanceCursor(source string, ids []int64) {
	cursorMu.Lock()
	defer cursorMu.Unlock()
	for _, id := range ids {
		if id > cursors[source] {
			cursors[source] = id
		}
	}
}

// selectBatch locks and returns the next batch of source inside tx.
func selectBatch(ctx context.Context, tx pgx.Tx, source string, batch int) (pgx.Rows, error) {
	if mutant.Is(mutant.ParallelRelayReorder) {
		return tx.Query(ctx, selectNoAggLockSQL, batch)
	}
	var rows pgx.Rows
	var err error
	if mutant.Is(mutant.RelayIDCursor) {
		rows, err = tx.Query(ctx, candidatesCursorSQL, batch, cursorOf(source))
	} else {
		rows, err = tx.Query(ctx, candidatesSQL, batch)
	}
	if err != nil {
		return nil, fmt.Errorf("find aggregates: %w", err)
	}
	cands, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find aggregates: %w", err)
	}
	if len(cands) == 0 {
		return tx.Query(ctx, `SELECT NULL::bigint, '', '', 0::bigint, '', '', '', '' WHERE false`)
	}
	rows, err = tx.Query(ctx, lockSQL, cands)
	if err != nil {
		return nil, fmt.Errorf("lock aggregates: %w", err)
	}
	owned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock aggregates: %w", err)
	}
	if len(owned) < len(cands) {
		failpoint.Reached("relay.aggregate-skipped")
	}
	return tx.Query(ctx, rowsSQL, owned, batch)
}

// Poll publishes one batch from s and returns how many rows it marked.
func Poll(ctx context.Context, cfg Config, s Source) (int, error) {
	tx, err := s.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := selectBatch(ctx, tx, s.Name, cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("select unpublished: %w", err)
	}
	var batch []row
	for rows.Next() {
		var r row
		var payload string
		if err := rows.Scan(&r.id, &r.eventID, &r.agg, &r.seq, &r.typ, &r.topic, &r.source, &payload); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan outbox row: %w", err)
		}
		r.payload = []byte(payload)
		batch = append(batch, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("select unpublished: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	if err := failpoint.Inject("relay.after-select"); err != nil {
		return 0, err
	}
	// The batch is in id order, and within one aggregate ids grow with
	// seq (package outbox), so each aggregate's rows are already in seq
	// order; kgo keeps the order of records produced to one partition.
	ids := make([]int64, len(batch))
	recs := make([]*kgo.Record, len(batch))
	for i, r := range batch {
		ids[i] = r.id
		recs[i] = outbox.Record(r.eventID, r.agg, r.seq, r.typ, r.topic, r.source, r.payload)
		if mutant.Is(mutant.UnkeyedPublish) {
			recs[i].Key = nil // planted bug: records of one order spread over partitions
		}
	}
	mark := func() error {
		_, err := tx.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE id = ANY($1)`, ids)
		if err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
		return nil
	}
	if mutant.Is(mutant.MarkBeforeAck) {
		// Planted bug: commit the mark first, then produce; a crash or a
		// failed produce loses the rows.
		if err := mark(); err != nil {
			return 0, err
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, fmt.Errorf("commit mark: %w", err)
		}
		if err := failpoint.Inject("relay.after-publish"); err != nil {
			return 0, err
		}
		if err := cfg.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return 0, fmt.Errorf("produce %d records: %w", len(recs), err)
		}
		return len(batch), failpoint.Inject("relay.after-mark")
	}
	if cfg.Log.Enabled(ctx, slog.LevelDebug) {
		var b strings.Builder
		for _, r := range batch {
			fmt.Fprintf(&b, "%s:%d ", r.agg, r.seq)
		}
		cfg.Log.Debug("relay batch", "db", s.Name, "rows", b.String())
	}
	if err := cfg.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce %d records: %w", len(recs), err)
	}
	// From here until the commit, the broker has the batch and the rows
	// are not marked: any failure republishes it (duplicates, legal).
	committed := false
	defer func() {
		if !committed {
			failpoint.Reached("relay.mark-failed")
		}
	}()
	if err := failpoint.Inject("relay.after-publish"); err != nil {
		return 0, err
	}
	if err := mark(); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit mark: %w", err)
	}
	committed = true
	if mutant.Is(mutant.RelayIDCursor) {
		advanceCursor(s.Name, ids)
	}
	if err := failpoint.Inject("relay.after-mark"); err != nil {
		return 0, err
	}
	return len(batch), nil
}

// Cleanup deletes published rows older than retention. Unpublished rows
// are never deleted, whatever their age.
func Cleanup(ctx context.Context, p *pgxpool.Pool, retention time.Duration) error {
	if err := failpoint.Inject("relay.before-cleanup"); err != nil {
		return err
	}
	_, err := p.Exec(ctx, `DELETE FROM outbox WHERE published_at IS NOT NULL AND published_at < now() - $1::interval`,
		fmt.Sprintf("%d milliseconds", retention.Milliseconds()))
	if err != nil {
		return fmt.Errorf("delete published rows: %w", err)
	}
	return nil
}
