// Package cdcrelay is the change-data-capture flavour of the reference
// relay: instead of polling each outbox, it streams the outbox's inserts
// out of PostgreSQL's write-ahead log through a logical replication slot
// (the built-in pgoutput plugin, one publication on the outbox table) and
// publishes them to Kafka, as Debezium's outbox event router does. It never
// writes to the outbox: a row has no "published" mark, its record in the
// log is the only proof that it was delivered.
//
// It keeps the polling relay's guarantees by other means:
//
//   - At least once. A transaction's rows are produced, and acknowledged by
//     the broker, before the slot's confirmed position (confirmed_flush_lsn)
//     moves past the transaction's commit. A crash in between makes the
//     next holder of the slot stream the transaction again: duplicates,
//     which consumers drop by event_id, never a loss. A PostgreSQL crash
//     may move the confirmed position back to where the slot was last saved
//     (a checkpoint): more duplicates, still no loss.
//   - Restart from the confirmed position. A relay starts streaming at
//     0/0, which the server reads as "from the slot's confirmed position".
//   - Per-aggregate order. pgoutput sends committed transactions in commit
//     order, and an aggregate's rows commit in seq order (package outbox);
//     the relay produces them in that order with key = aggregate id, so one
//     order's records land in one partition in seq order. Only one
//     connection can stream a slot at a time, so there is no second relay
//     to interleave with; a relay that takes over after another one died
//     re-streams from the confirmed position, which keeps the first
//     appearance of every record in order (each publisher publishes in
//     order, and the later one starts no later than the first one's
//     unconfirmed suffix).
//   - Competing relays and fail-over. Each outbox database has one slot
//     (outbox_<database>), and every relay process races for each of them:
//     START_REPLICATION on a slot another walsender holds fails with
//     SQLSTATE 55006. A relay that lost waits: it checks the slot's
//     "active" flag over a status connection every Wait and tries again
//     when the slot is free, which is when the holder's connection ended
//     (the holder died, its link was cut, the server restarted). The
//     status connection is reconnected after any error, so a waiting relay
//     survives a server restart.
//   - Healthy only once the publication and the slot of every database
//     exist. Rows committed before a slot existed are never decoded, and
//     the harness starts the workload when every component is healthy.
//
// Positions: the relay confirms the end LSN of the last commit it
// published. When it has nothing in flight it also confirms the server's
// keepalive position, so a slot whose database is idle does not hold WAL
// that other databases write.
//
// Failpoints: relay.after-decode (a transaction decoded, nothing produced),
// relay.before-confirm (broker acked, position not confirmed),
// relay.after-confirm. Planted bugs (package mutant): cdc-confirm-before-ack,
// cdc-healthy-before-slot, cdc-no-slot-reconnect.
package cdcrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
)

// Publication is the publication the relay creates in every outbox
// database: inserts into the outbox table only.
const Publication = "outbox_cdc"

// Source is one outbox database.
type Source struct {
	Name string
	DSN  string
}

// Config configures Run.
type Config struct {
	Sources []Source
	Client  *kgo.Client
	// Instance names the relay's connections (application_name), which is
	// how the harness tells which instance holds a slot.
	Instance string
	// Wait is how often a relay waiting for a slot checks it (default 200ms).
	Wait time.Duration
	// Status is the standby status interval (default 1s).
	Status time.Duration
	// Batch is the most transactions produced together (default 50).
	Batch int
	Log   *slog.Logger
}

// Relay streams every source's slot once it holds it.
type Relay struct {
	cfg   Config
	ready atomic.Int32
}

// New returns a relay for cfg with its defaults filled in.
func New(cfg Config) *Relay {
	if cfg.Wait <= 0 {
		cfg.Wait = 200 * time.Millisecond
	}
	if cfg.Status <= 0 {
		cfg.Status = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 50
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Relay{cfg: cfg}
}

// Ready reports whether the publication and the slot of every source exist
// (the /healthz answer). With cdc-healthy-before-slot it is true at once.
func (r *Relay) Ready() bool {
	return mutant.Is(mutant.CDCHealthyBeforeSlot) || int(r.ready.Load()) == len(r.cfg.Sources)
}

// Run streams every source until ctx ends. It returns early only for a
// setting the server lacks (a *svc.ConfigError: exit code 2).
func (r *Relay) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(r.cfg.Sources))
	for _, s := range r.cfg.Sources {
		wg.Go(func() {
			if err := r.source(ctx, s); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// SlotName is the slot of an outbox database: outbox_<database>, lowered
// and with every other character replaced, at most 63 bytes.
func SlotName(database string) string {
	s := "outbox_" + slotChars.ReplaceAllString(strings.ToLower(database), "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

var slotChars = regexp.MustCompile(`[^a-z0-9_]`)

var errSlotBusy = errors.New("slot held by another walsender")

// source sets one database up, then holds its slot whenever it can.
func (r *Relay) source(ctx context.Context, s Source) error {
	log := r.cfg.Log.With("db", s.Name)
	if mutant.Is(mutant.CDCHealthyBeforeSlot) {
		// Planted bug: healthy already, the slot comes with the first
		// check, one second from now.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	var slot string
	for n := 0; ; n++ {
		var err error
		if slot, err = r.setup(ctx, s); err == nil {
			break
		}
		var ce *svc.ConfigError
		if errors.As(err, &ce) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if n%20 == 0 {
			log.Warn("cdc setup", "err", err)
		}
		svc.Backoff(ctx, n)
	}
	r.ready.Add(1)
	log.Info("publication and slot ready", "slot", slot, "publication", Publication)
	st := &statusConn{dsn: withParams(s.DSN, map[string]string{"application_name": r.cfg.Instance})}
	defer st.close()
	for n := 0; ctx.Err() == nil; {
		if err := r.waitForSlot(ctx, st, slot, log); err != nil {
			return nil // ctx ended
		}
		err := r.stream(ctx, s, slot, log)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errSlotBusy):
			n = 0 // lost the race: wait again
		case err != nil:
			log.Warn("cdc stream", "slot", slot, "err", err)
			svc.Backoff(ctx, n)
			n++
		}
	}
	return nil
}

// setup makes sure the publication and the slot exist and returns the
// slot's name. The outbox table is the service's: until its migration ran,
// there is nothing to publish and setup fails (and is retried).
func (r *Relay) setup(ctx context.Context, s Source) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, withParams(s.DSN, map[string]string{"application_name": r.cfg.Instance}))
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var db string
	var table bool
	if err := conn.QueryRow(ctx, `SELECT current_database(), to_regclass('outbox') IS NOT NULL`).Scan(&db, &table); err != nil {
		return "", fmt.Errorf("look up the outbox table: %w", err)
	}
	if !table {
		return "", errors.New("no outbox table yet (the service creates it)")
	}
	var pub bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, Publication).Scan(&pub); err != nil {
		return "", fmt.Errorf("look up publication: %w", err)
	}
	if !pub {
		_, err := conn.Exec(ctx, `CREATE PUBLICATION `+Publication+` FOR TABLE outbox WITH (publish = 'insert')`)
		if err != nil && !isCode(err, "42710", "23505") { // another relay was first
			return "", fmt.Errorf("create publication: %w", err)
		}
	}
	slot := SlotName(db)
	var have bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&have); err != nil {
		return "", fmt.Errorf("look up slot: %w", err)
	}
	if have {
		return slot, nil
	}
	rc, err := pgconn.Connect(ctx, r.replicationDSN(s.DSN))
	if err != nil {
		return "", fmt.Errorf("replication connection: %w", err)
	}
	defer rc.Close(context.WithoutCancel(ctx))
	_, err = pglogrepl.CreateReplicationSlot(ctx, rc, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	switch {
	case err == nil, isCode(err, "42710"): // created, or another relay was first
		return slot, nil
	case isCode(err, "55000"):
		// "logical decoding requires wal_level >= logical": a setting the
		// server lacks, not something a retry fixes.
		return "", &svc.ConfigError{Msg: fmt.Sprintf("database %s: cannot create replication slot %s: %v (the server needs wal_level=logical: declare it in the manifest's postgres.settings)", s.Name, slot, err)}
	}
	return "", fmt.Errorf("create slot %s: %w", slot, err)
}

func (r *Relay) replicationDSN(dsn string) string {
	return withParams(dsn, map[string]string{"replication": "database", "application_name": r.cfg.Instance})
}

// statusConn is the connection a waiting relay checks its slot over.
type statusConn struct {
	dsn  string
	conn *pgx.Conn
	// broken: the last check failed; the next one reconnects first.
	broken bool
}

func (st *statusConn) close() {
	if st.conn != nil {
		st.conn.Close(context.Background())
	}
}

// active asks whether slot is held by a walsender.
func (st *statusConn) active(ctx context.Context, slot string) (bool, error) {
	// The correct relay reconnects after any error. Planted bug
	// cdc-no-slot-reconnect: the connection made at the first check is
	// used forever, so after a server restart every check fails.
	if st.conn == nil || (st.broken && !mutant.Is(mutant.CDCNoSlotReconnect)) {
		st.close()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgx.Connect(cctx, st.dsn)
		cancel()
		if err != nil {
			st.conn, st.broken = nil, true
			return false, fmt.Errorf("status connection: %w", err)
		}
		st.conn, st.broken = c, false
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var active bool
	err := st.conn.QueryRow(qctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
	if err != nil {
		st.broken = true
		return false, fmt.Errorf("check slot %s: %w", slot, err)
	}
	return active, nil
}

// waitForSlot returns once the slot is not held by anyone, or an error when
// ctx ended.
func (r *Relay) waitForSlot(ctx context.Context, st *statusConn, slot string, log *slog.Logger) error {
	for fails := 0; ; {
		active, err := st.active(ctx, slot)
		if err == nil && !active {
			return nil
		}
		if err != nil {
			if fails%25 == 0 {
				log.Warn("waiting for slot", "slot", slot, "err", err)
			}
			fails++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.cfg.Wait):
		}
	}
}

// stream holds the slot until the connection fails or ctx ends. It returns
// errSlotBusy when another walsender took the slot first.
func (r *Relay) stream(ctx context.Context, s Source, slot string, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgconn.Connect(cctx, r.replicationDSN(s.DSN))
	cancel()
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + Publication + "'"},
	})
	if isCode(err, "55006") {
		return errSlotBusy
	}
	if err != nil {
		return fmt.Errorf("start replication on %s: %w", slot, err)
	}
	log.Info("streaming", "slot", slot)
	st := &streamState{r: r, conn: conn, slot: slot, src: s.Name, log: log, dec: newDecoder()}
	return st.run(ctx)
}

// streamState is one session on a slot.
type streamState struct {
	r    *Relay
	conn *pgconn.PgConn
	slot string
	src  string
	log  *slog.Logger
	dec  *decoder
	// confirmed is the position last sent as flushed (0: none this
	// session; the server ignores an invalid position).
	confirmed pglogrepl.LSN
	// ready are decoded transactions not yet published.
	ready []*txn
}

func (st *streamState) run(ctx context.Context) error {
	next := time.Now().Add(st.r.cfg.Status)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(st.ready) >= st.r.cfg.Batch {
			if err := st.publish(ctx); err != nil {
				return err
			}
		}
		// With something decoded, wait a moment for more (a burst is
		// produced together); otherwise until the next status message.
		deadline := next
		if len(st.ready) > 0 {
			deadline = time.Now().Add(2 * time.Millisecond)
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := st.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !pgconn.Timeout(err) {
				return fmt.Errorf("receive: %w", err)
			}
			if len(st.ready) > 0 {
				if err := st.publish(ctx); err != nil {
					return err
				}
				continue
			}
			if err := st.sendStatus(); err != nil {
				return err
			}
			next = time.Now().Add(st.r.cfg.Status)
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return fmt.Errorf("keepalive: %w", err)
				}
				// Everything the server sent before this keepalive has
				// arrived; with nothing in flight it is all published.
				if len(st.ready) == 0 && !st.dec.inTxn() && k.ServerWALEnd > st.confirmed {
					st.confirmed = k.ServerWALEnd
				}
				if k.ReplyRequested {
					if err := st.sendStatus(); err != nil {
						return err
					}
					next = time.Now().Add(st.r.cfg.Status)
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return fmt.Errorf("xlog data: %w", err)
				}
				t, err := st.dec.feed(x.WALData)
				if err != nil {
					return err
				}
				if t == nil {
					continue
				}
				if len(t.rows) > 0 {
					if err := failpoint.Inject("relay.after-decode"); err != nil {
						return err
					}
					if mutant.Is(mutant.CDCConfirmBeforeAck) {
						// Planted bug: the position moves as soon as the
						// transaction is decoded, before its rows were
						// produced.
						st.confirmed = t.end
						if err := st.sendStatus(); err != nil {
							return err
						}
						if err := failpoint.Inject("relay.after-confirm"); err != nil {
							return err
						}
					}
				}
				st.ready = append(st.ready, t)
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("server: %w", pgconn.ErrorResponseToPgError(m))
		}
	}
}

// publish produces every ready transaction's rows, waits for the broker's
// acks, then confirms the last transaction's end.
func (st *streamState) publish(ctx context.Context) error {
	var recs []*kgo.Record
	for _, t := range st.ready {
		for _, w := range t.rows {
			recs = append(recs, outbox.Record(w.eventID, w.agg, w.seq, w.typ, w.topic, w.source, w.payload))
		}
	}
	last := st.ready[len(st.ready)-1].end
	if len(recs) > 0 {
		if st.log.Enabled(ctx, slog.LevelDebug) {
			var b strings.Builder
			for _, t := range st.ready {
				for _, w := range t.rows {
					fmt.Fprintf(&b, "%s:%d ", w.agg, w.seq)
				}
			}
			st.log.Debug("cdc batch", "slot", st.slot, "records", b.String(), "end", last)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := st.r.cfg.Client.ProduceSync(pctx, recs...).FirstErr()
		cancel()
		if err != nil {
			return fmt.Errorf("produce %d records: %w", len(recs), err)
		}
		if !mutant.Is(mutant.CDCConfirmBeforeAck) {
			if err := failpoint.Inject("relay.before-confirm"); err != nil {
				return err
			}
		}
	}
	st.ready = st.ready[:0]
	if mutant.Is(mutant.CDCConfirmBeforeAck) {
		return nil // confirmed already, at decode
	}
	st.confirmed = last
	if err := st.sendStatus(); err != nil {
		return err
	}
	if len(recs) > 0 {
		return failpoint.Inject("relay.after-confirm")
	}
	return nil
}

func (st *streamState) sendStatus() error {
	if err := pglogrepl.SendStandbyStatusUpdate(context.Background(), st.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: st.confirmed}); err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	return nil
}

// withParams sets query parameters on a postgres URL.
func withParams(dsn string, params map[string]string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, c := range codes {
		if pe.Code == c {
			return true
		}
	}
	return false
}
