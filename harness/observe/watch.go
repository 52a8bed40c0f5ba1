package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// sagaWatch is the quiesce stage's proof of stuck sagas (issue 12 item 5).
//
// The spec promises that the saga's owner acts on a pending saga within one
// step timeout, visibly: a new outbox row of its aggregate (a command
// re-sent, a compensation), or a change of its status or trail. The watch
// follows every pending saga's status and trail on every poll, and the
// count and ids of its outbox rows every half step timeout; a saga that
// did not change for k step timeouts since max(its last change, the
// watch's start — which follows heal), with every component healthy all
// along (the history's lifecycle ops, judged by checkers.Health as the
// checker judges them), is stuck. Once every pending saga is, the wait
// stops: nothing the harness does later can move them. The recorded op
// carries what the checker needs to decide the same thing from the
// history alone.
//
// An owner that keeps re-sending into a relay that publishes nothing (a
// CDC relay that lost its slot for good, healthy all along) writes rows
// that never leave the outbox: visible to the watch, invisible to every
// other service. So the watch also reads the Kafka log's end offsets at
// every row check, after the rows. A row first seen after the log last
// grew was not published (its record would have grown the log), and when
// the log stayed unchanged for the settle window with every component
// healthy, a correct relay would have published something (the
// outbox-drains promise): such rows are no action on the saga. Its change
// time is then the log's last growth, not its last row (SagaWatch's
// Unpublished says so). Only when k step timeouts are at least the settle
// window, so that the proof's window covers it.
type sagaWatch struct {
	rec        *models.Recorder
	t          Target
	stuckAfter time.Duration
	every      time.Duration // row checks
	fromT      int64
	lastCheck  time.Time
	checkedT   int64
	sagas      map[string]*watched
	order      []string

	// the Kafka log's end offsets at the last row check, and the time of
	// the check that first saw them (logGrewT; fromT before any)
	logCl    *kgo.Client
	logEnds  map[partKey]int64
	logGrewT int64
	logOK    bool // the last read of the log's ends succeeded
}

type watched struct {
	status   string
	trail    []string
	changedT int64
	statusT  int64 // its last status or trail change (the watch's start before any)
	rowsT    int64 // the last check that saw its rows change (0: never)
	rows     int64
	maxID    int64
	counted  bool
	pending  bool
}

// newSagaWatch returns nil when the spec makes no step-timeout promise or
// the target declares no outbox to see the owner's actions in.
func newSagaWatch(rec *models.Recorder, t Target) *sagaWatch {
	after := t.stuckAfter()
	if after <= 0 {
		return nil
	}
	every := time.Duration(t.Saga.StepTimeoutMS) * time.Millisecond / 2
	now := historyT(rec)
	return &sagaWatch{rec: rec, t: t, stuckAfter: after, every: max(every, 100*time.Millisecond),
		fromT: now, sagas: map[string]*watched{}, logGrewT: now}
}

func (w *sagaWatch) close() {
	if w != nil && w.logCl != nil {
		w.logCl.Close()
		w.logCl = nil
	}
}

// readLog reads the end offsets of every topic of the run and moves
// logGrewT to now when they differ from the last read. A failed read
// leaves logOK false: no row is then taken for unpublished.
func (w *sagaWatch) readLog(ctx context.Context, now int64) {
	w.logOK = false
	if len(w.t.Brokers) == 0 || len(w.t.Topics) == 0 {
		return
	}
	if w.logCl == nil {
		c, err := kgo.NewClient(kgo.SeedBrokers(w.t.Brokers...), kgo.MetadataMinAge(100*time.Millisecond))
		if err != nil {
			return
		}
		w.logCl = c
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(w.logCl).ListEndOffsets(ctx, w.t.Topics...)
	if err != nil {
		return
	}
	got := map[partKey]int64{}
	bad := false
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			bad = true
			return
		}
		got[partKey{o.Topic, o.Partition}] = o.Offset
	})
	if bad {
		return
	}
	if w.logEnds != nil && !maps.Equal(w.logEnds, got) {
		w.logGrewT = now
	}
	w.logEnds, w.logOK = got, true
}

// changed is the saga's change time at now: its last status or trail
// change or row change — or, when every row change since the log last grew
// is an unpublished row and the log then stayed unchanged for the settle
// window, the log's last growth.
func (w *sagaWatch) changed(s *watched, now int64) (int64, bool) {
	if w.logOK && s.rowsT > w.logGrewT && s.rowsT >= s.statusT &&
		w.stuckAfter >= w.t.settle() && now-w.logGrewT >= int64(w.t.settle()) {
		return max(s.statusT, w.logGrewT), true
	}
	return s.changedT, false
}

// observe takes one poll's pending sagas and reports whether every one of
// them is now proven stuck.
func (w *sagaWatch) observe(ctx context.Context, pending []sagaView) bool {
	now := historyT(w.rec)
	for _, s := range w.sagas {
		s.pending = false
	}
	for _, o := range pending {
		s := w.sagas[o.ID]
		if s == nil {
			s = &watched{status: o.Status, trail: o.Trail, changedT: w.fromT, statusT: w.fromT}
			w.sagas[o.ID] = s
			w.order = append(w.order, o.ID)
		} else if s.status != o.Status || !slices.Equal(s.trail, o.Trail) {
			s.status, s.trail, s.changedT, s.statusT = o.Status, o.Trail, now, now
		}
		s.pending = true
	}
	if time.Since(w.lastCheck) < w.every {
		return false
	}
	w.lastCheck = time.Now()
	ids := make([]string, 0, len(pending))
	for _, o := range pending {
		ids = append(ids, o.ID)
	}
	rows, err := outboxRowsOf(ctx, w.t, ids)
	if err != nil {
		w.t.logger().Debug("quiesce: outbox rows of pending sagas", "err", err)
		return false // no check, no proof
	}
	now = historyT(w.rec)
	for _, id := range ids {
		s, r := w.sagas[id], rows[id]
		if s.counted && (s.rows != r.n || s.maxID != r.maxID) {
			s.changedT, s.rowsT = now, now
		}
		s.rows, s.maxID, s.counted = r.n, r.maxID, true
	}
	w.readLog(ctx, now)
	w.checkedT = now
	// proven when every pending saga's quiet window is long enough
	after := int64(w.stuckAfter)
	for _, id := range ids {
		c, _ := w.changed(w.sagas[id], now)
		if now-max(c, w.fromT) < after {
			return false
		}
	}
	h := checkers.HealthOf(w.rec.Ops())
	for _, id := range ids {
		c, _ := w.changed(w.sagas[id], now)
		start := max(c, w.fromT)
		if h.HealedT > start {
			start = h.HealedT
		}
		hs, why, _ := h.From(nil, start, now)
		if why != "" || now-hs < after {
			return false
		}
	}
	return true
}

// fill writes what the watch saw into the quiesce op.
func (w *sagaWatch) fill(q *models.Quiesce) {
	q.StepTimeoutMS = w.t.Saga.StepTimeoutMS
	q.StuckAfterMS = w.stuckAfter.Milliseconds()
	q.FromT, q.CheckedT = w.fromT, w.checkedT
	if q.AllTerminal {
		return
	}
	for _, id := range w.order {
		if s := w.sagas[id]; s.pending && slices.Contains(q.Pending, id) {
			c, unpublished := w.changed(s, w.checkedT)
			q.Sagas = append(q.Sagas, models.SagaWatch{ID: id, Status: s.status, Trail: s.trail, ChangedT: c, Rows: s.rows, MaxID: s.maxID, Unpublished: unpublished})
		}
	}
}

type rowCount struct{ n, maxID int64 }

// outboxRowsOf counts, over every observed outbox, the rows of each
// aggregate in ids and sums their highest ids (a change detector: a new
// row changes it, a deleted one too). The manifest's outbox query is used
// as a subquery, so any target's query works unchanged.
func outboxRowsOf(ctx context.Context, t Target, ids []string) (map[string]rowCount, error) {
	out := map[string]rowCount{}
	for _, q := range t.Observe.Outbox {
		inner := strings.TrimRight(strings.TrimSpace(q.SQL), ";")
		sub := targets.Query{DB: q.DB, SQL: fmt.Sprintf(`SELECT aggregate_id::text AS aggregate_id, count(*) AS n, coalesce(max(id), 0)::bigint AS max_id
FROM (%s) AS q WHERE aggregate_id::text = ANY($1::text[]) GROUP BY 1`, inner)}
		rows, err := query(ctx, t, sub, []any{ids}, "aggregate_id", "n", "max_id")
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			d := decoder{r: r}
			id, n, m := d.str("aggregate_id"), d.int("n"), d.int("max_id")
			if d.err != nil {
				return nil, fmt.Errorf("outbox rows of %s: %w", q.DB, d.err)
			}
			c := out[id]
			c.n += n
			c.maxID += m
			out[id] = c
		}
	}
	return out, nil
}
