package observe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// row is one result row by column name.
type row map[string]any

// query runs q against its database (direct DSN) and returns every row.
// Rows read before an error are returned with it. A column ending in "?"
// is optional: a result without it reads as NULL.
func query(ctx context.Context, t Target, q targets.Query, args []any, cols ...string) ([]row, error) {
	if t.DSN == nil {
		return nil, fmt.Errorf("query %s: no DSN function", q.DB)
	}
	cols, fromLog := logColumns(q, cols)
	timeout := t.SQLTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, t.DSN(q.DB))
	if err != nil {
		return nil, fmt.Errorf("query %s: connect: %w", q.DB, err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, q.SQL, args...)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q.DB, err)
	}
	defer rows.Close()
	idx := map[string]int{}
	for i, fd := range rows.FieldDescriptions() {
		idx[fd.Name] = i
	}
	var want []string
	for _, c := range cols {
		name, optional := strings.CutSuffix(c, "?")
		if _, ok := idx[name]; !ok && !optional {
			return nil, fmt.Errorf("query %s: result has no column %q (want %v)", q.DB, name, cols)
		}
		want = append(want, name)
	}
	cols = want
	var out []row
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return out, fmt.Errorf("query %s: read row %d: %w", q.DB, len(out)+1, err)
		}
		r := row{}
		for _, c := range cols {
			if i, ok := idx[c]; ok {
				r[c] = vals[i]
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("query %s: %w", q.DB, err)
	}
	if fromLog {
		return out, t.fillPublished(ctx, q, out)
	}
	return out, nil
}

// The getters convert a column to the Go type the history wants. A NULL
// reads as the zero value; a value of another type is an error, because
// the target broke the column contract and guessing would fabricate.

func (r row) str(c string) (string, error) {
	switch v := r[c].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case [16]byte: // uuid
		return fmt.Sprintf("%x-%x-%x-%x-%x", v[0:4], v[4:6], v[6:8], v[8:10], v[10:16]), nil
	}
	return "", fmt.Errorf("column %s: %T is not text", c, r[c])
}

func (r row) int(c string) (int64, error) {
	switch v := r[c].(type) {
	case nil:
		return 0, nil
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case float64:
		if v == math.Trunc(v) {
			return int64(v), nil
		}
	}
	return 0, fmt.Errorf("column %s: %T %v is not an integer", c, r[c], r[c])
}

func (r row) bool(c string) (bool, error) {
	switch v := r[c].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	}
	return false, fmt.Errorf("column %s: %T is not bool", c, r[c])
}

// decoder collects the first conversion error of a row.
type decoder struct {
	r   row
	err error
}

func (d *decoder) str(c string) string {
	v, err := d.r.str(c)
	d.err = errors.Join(d.err, err)
	return v
}

func (d *decoder) int(c string) int64 {
	v, err := d.r.int(c)
	d.err = errors.Join(d.err, err)
	return v
}

func (d *decoder) bool(c string) bool {
	v, err := d.r.bool(c)
	d.err = errors.Join(d.err, err)
	return v
}

// observeResource records one counted resource's rows (columns key,
// available, reserved) and closes them with a FResourceSnapshot whose DB is
// the resource's name.
func observeResource(ctx context.Context, rec *models.Recorder, t Target, rq ResourceQuery) {
	q := rq.Query
	rows, err := query(ctx, t, q, nil, "key", "available", "reserved")
	n := 0
	for _, r := range rows {
		d := decoder{r: r}
		s := models.ResourceState{Resource: rq.Name, Key: d.str("key"), Available: d.int("available"), Reserved: d.int("reserved")}
		if d.err != nil {
			err = fmt.Errorf("resource %s (%s) row %d: %w", rq.Name, q.DB, n+1, d.err)
			break
		}
		rec.Record(models.ProcObserver, models.State, models.FResourceState, "", s)
		n++
	}
	snap := Snapshot{DB: rq.Name, Rows: n, Complete: err == nil}
	if err != nil {
		snap.Error = err.Error()
		t.logger().Warn("observe resource failed", "resource", rq.Name, "db", q.DB, "err", err)
	}
	rec.Record(models.ProcObserver, models.State, models.FResourceSnapshot, "", snap)
}

func observeOutbox(ctx context.Context, rec *models.Recorder, t Target, q targets.Query, publishedBefore map[string]bool) {
	rows, err := query(ctx, t, q, nil, "id", "event_id", "aggregate_id", "seq?", "type", "topic", "published")
	n := 0
	for _, r := range rows {
		d := decoder{r: r}
		o := models.OutboxRow{DB: q.DB, ID: d.int("id"), EventID: d.str("event_id"), Seq: d.int("seq"),
			Type: d.str("type"), Topic: d.str("topic")}
		// Published only if it already was before the Kafka log was read.
		o.Published = d.bool("published") && publishedBefore[o.EventID]
		agg := d.str("aggregate_id")
		if d.err != nil {
			err = fmt.Errorf("outbox %s row %d: %w", q.DB, n+1, d.err)
			break
		}
		rec.Record(models.ProcObserver, models.State, models.FOutboxRow, agg, o)
		n++
	}
	// Complete is the manifest's promise, and only holds if we read it all.
	snap := models.OutboxSnapshot{DB: q.DB, Rows: n, Complete: q.Complete && err == nil}
	if err != nil {
		snap.Error = err.Error()
		t.logger().Warn("observe outbox failed", "db", q.DB, "err", err)
	}
	rec.Record(models.ProcObserver, models.State, models.FOutboxSnapshot, "", snap)
}

func observeApplied(ctx context.Context, rec *models.Recorder, t Target, q targets.Query) {
	rows, err := query(ctx, t, q, nil, "consumer", "event_id", "aggregate_id", "source", "type", "seq?", "position")
	n := 0
	for _, r := range rows {
		d := decoder{r: r}
		a := models.Applied{Consumer: d.str("consumer"), EventID: d.str("event_id"), Source: d.str("source"),
			Type: d.str("type"), Seq: d.int("seq"), Position: d.int("position")}
		agg := d.str("aggregate_id")
		if d.err != nil {
			err = fmt.Errorf("applied %s row %d: %w", q.DB, n+1, d.err)
			break
		}
		rec.Record(models.ProcObserver, models.State, models.FApplied, agg, a)
		n++
	}
	snap := Snapshot{DB: q.DB, Rows: n, Complete: q.Complete && err == nil}
	if err != nil {
		snap.Error = err.Error()
		t.logger().Warn("observe applied failed", "db", q.DB, "err", err)
	}
	rec.Record(models.ProcObserver, models.State, FAppliedSnapshot, "", snap)
}
