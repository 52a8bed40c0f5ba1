// Package observe takes the final snapshot of a run after the faults are
// healed: it waits for in-flight sagas (Quiesce), then records what the
// broker log, the workload API and the target's databases hold (Observe).
//
// Everything it sees goes into the history as observer ops; everything it
// could not see goes in too, as a snapshot op with an Error and
// Complete=false, so a checker can say "unknown" instead of guessing. It
// never fills a gap with a made-up value.
package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// The closing snapshots of the order list, the stock query and each applied
// query are models.FOrdersSnapshot, FStockSnapshot and FAppliedSnapshot.
const (
	FOrdersSnapshot  = models.FOrdersSnapshot
	FStockSnapshot   = models.FStockSnapshot
	FAppliedSnapshot = models.FAppliedSnapshot
)

// Snapshot closes one observation (models.Snapshot).
type Snapshot = models.Snapshot

// Target is what the observer needs to know about a running target.
type Target struct {
	// APIURL is the base URL of the workload API.
	APIURL string
	// Workload says how to list (or read) the target's sagas; Saga is the
	// saga spec (nil: an outbox-only target, with no saga to wait for).
	Workload *models.Workload
	Saga     *models.SagaSpec
	// IDs returns the saga ids the clients were given (read one by one
	// when the workload declares no list).
	IDs func() []string
	// Resources are the counted resources' queries, in order.
	Resources []ResourceQuery
	// SeqFromOutbox: the target's records carry no seq header (a missing
	// one is not malformed).
	SeqFromOutbox bool
	// DSN returns a direct (unproxied) PostgreSQL URL for a database.
	DSN func(db string) string
	// Brokers are direct (unproxied) Kafka addresses.
	Brokers []string
	// Topics are read in this order, every partition from offset 0.
	Topics []string
	// Observe is the manifest's observer SQL.
	Observe targets.Observe

	// HTTPClient for the API (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// KafkaTimeout bounds the broker read (default 30 s); past it the
	// snapshot is recorded with Complete=false.
	KafkaTimeout time.Duration
	// SQLTimeout bounds each SQL query (default 30 s).
	SQLTimeout time.Duration
	// DrainWait bounds the wait for the outboxes to publish every row
	// before they are read (default 15 s; at least twice Settle).
	DrainWait time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger

	// The waits after heal (issue 12). Saga's step timeout
	// (StepTimeoutMS) lets the quiesce wait prove a pending saga stuck and
	// stop early; its terminal statuses are the ones the wait ends on.
	// StuckTimeouts is k: a pending saga unchanged for k step timeouts
	// after heal, with every component healthy, is stuck (default 3).
	StuckTimeouts int
	// Settle is the outbox-drains settle window (default 2 s): a row that
	// stays unpublished that long with every relay healthy and the outbox
	// idle is stuck, and the drain watch stops.
	Settle time.Duration
	// Decl is the target's declaration (the history's target op): the
	// consumer groups whose committed offsets are waited for and recorded,
	// and the relays whose health the drain proof needs. Nil: no group is
	// observed and every component counts as a relay.
	Decl *models.TargetDecl
	// LagWait bounds the wait for every declared group to catch up
	// (default 15 s).
	LagWait time.Duration

	// tail follows the log for outbox queries published in the log
	// (logtail.go).
	tail *logTail
}

// DefaultStuckTimeouts and DefaultSettle are the defaults of
// Target.StuckTimeouts and Target.Settle.
const (
	DefaultStuckTimeouts = 3
	DefaultSettle        = 2 * time.Second
)

func (t Target) stuckAfter() time.Duration {
	if t.Saga == nil || t.Saga.StepTimeoutMS <= 0 || len(t.Observe.Outbox) == 0 {
		return 0
	}
	k := t.StuckTimeouts
	if k <= 0 {
		k = DefaultStuckTimeouts
	}
	return time.Duration(k) * time.Duration(t.Saga.StepTimeoutMS) * time.Millisecond
}

func (t Target) settle() time.Duration {
	if t.Settle > 0 {
		return t.Settle
	}
	return DefaultSettle
}

func (t Target) httpClient() *http.Client {
	if t.HTTPClient != nil {
		return t.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// ResourceQuery reads one counted resource.
type ResourceQuery struct {
	Name  string
	Query targets.Query
}

func (t Target) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// sagaView is what the observer learns of one saga: from the workload's
// list or read (pointers of models.ListSpec), or from the outbox
// (status_from events).
type sagaView struct {
	ID, Status, Key string
	Trail           []string
}

// listSagas returns every saga the target reports, sorted by id so the
// history does not depend on the target's order. complete says the list is
// every saga the target knows (a list; not saga-by-saga reads).
func listSagas(ctx context.Context, t Target) (out []sagaView, complete bool, err error) {
	switch {
	case t.Saga != nil && t.Saga.StatusFrom == models.StatusFromEvents:
		out, err = sagasFromEvents(ctx, t)
		complete = err == nil
	case t.Workload != nil && t.Workload.List != nil:
		out, err = listAPI(ctx, t, *t.Workload.List)
		complete = err == nil
	case t.Workload != nil && t.Workload.Read != nil:
		out, err = readEach(ctx, t, *t.Workload.Read)
	default:
		return nil, false, fmt.Errorf("the workload declares neither list nor read")
	}
	slices.SortFunc(out, func(a, b sagaView) int { return strings.Compare(a.ID, b.ID) })
	return out, complete, err
}

func getJSON(ctx context.Context, t Target, path string) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(t.APIURL, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	resp, err := t.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read reply: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b := string(body)
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		return nil, fmt.Errorf("GET %s answered %d: %s", path, resp.StatusCode, b)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("GET %s: decode reply: %w", path, err)
	}
	return v, nil
}

// view reads one saga's fields by the declared pointers; a missing id is
// an error, a missing key or trail is not.
func view(el any, id, status, key, trail string) (sagaView, error) {
	var v sagaView
	x, ok := models.Pointer(el, id)
	switch s := x.(type) {
	case string:
		v.ID = s
	case json.Number:
		v.ID = s.String()
	}
	if !ok || v.ID == "" {
		return v, fmt.Errorf("no id at %q", id)
	}
	if x, ok := models.Pointer(el, status); ok {
		v.Status, _ = x.(string)
	}
	if x, ok := models.Pointer(el, key); ok {
		v.Key, _ = x.(string)
	}
	if x, ok := models.Pointer(el, trail); ok {
		if l, ok := x.([]any); ok {
			for _, s := range l {
				if s, ok := s.(string); ok {
					v.Trail = append(v.Trail, s)
				}
			}
		}
	}
	return v, nil
}

func listAPI(ctx context.Context, t Target, l models.ListSpec) ([]sagaView, error) {
	v, err := getJSON(ctx, t, l.Path)
	if err != nil {
		return nil, fmt.Errorf("list sagas: %w", err)
	}
	items, ok := models.Pointer(v, l.Items)
	arr, isArr := items.([]any)
	if ok && items == nil {
		isArr = true // JSON null: no saga
	}
	if !ok || !isArr {
		return nil, fmt.Errorf("list sagas: GET %s: no JSON array at %q", l.Path, l.Items)
	}
	id, status, key, trail := l.Pointers()
	out := make([]sagaView, 0, len(arr))
	for i, el := range arr {
		sv, err := view(el, id, status, key, trail)
		if err != nil {
			return nil, fmt.Errorf("list sagas: element %d: %w", i, err)
		}
		out = append(out, sv)
	}
	return out, nil
}

func readEach(ctx context.Context, t Target, r models.ReadSpec) ([]sagaView, error) {
	if t.IDs == nil {
		return nil, errors.New("read sagas: no saga ids to read")
	}
	id, status, key, trail := r.Pointers()
	var out []sagaView
	for _, sid := range t.IDs() {
		v, err := getJSON(ctx, t, strings.ReplaceAll(r.Path, "{id}", url.PathEscape(sid)))
		if err != nil {
			return out, fmt.Errorf("read saga %s: %w", sid, err)
		}
		sv, err := view(v, id, status, key, trail)
		if err != nil {
			return out, fmt.Errorf("read saga %s: %w", sid, err)
		}
		out = append(out, sv)
	}
	return out, nil
}

// sagasFromEvents derives every saga's status from the outbox rows (status
// from events): the saga's success event makes it Success, its failure
// event Failure; a saga with rows but neither, and an acknowledged saga
// with no row yet, is Pending.
func sagasFromEvents(ctx context.Context, t Target) ([]sagaView, error) {
	s := t.Saga
	status := map[string]string{}
	if t.IDs != nil {
		for _, id := range t.IDs() {
			status[id] = s.Pending
		}
	}
	for _, q := range t.Observe.Outbox {
		rows, err := query(ctx, t, q, nil, "aggregate_id", "type")
		if err != nil {
			return nil, fmt.Errorf("sagas from events: %w", err)
		}
		for _, r := range rows {
			d := decoder{r: r}
			agg, typ := d.str("aggregate_id"), d.str("type")
			if d.err != nil || agg == "" {
				continue
			}
			switch {
			case typ == s.SuccessEvent:
				status[agg] = s.Success
			case typ == s.FailureEvent && status[agg] != s.Success:
				status[agg] = s.Failure
			case status[agg] == "":
				status[agg] = s.Pending
			}
		}
	}
	out := make([]sagaView, 0, len(status))
	for id, st := range status {
		out = append(out, sagaView{ID: id, Status: st})
	}
	return out, nil
}

// Quiesce polls the target's sagas (listSagas) every poll until every saga
// it knows is in a terminal status of the spec (success or failure), or
// until deadline, and records the outcome as one FQuiesce state op. An
// outbox-only target (no saga) has nothing to wait for: Quiesce records
// nothing and returns at once. A deadline reached with sagas still pending is a
// finding, not an error: it returns nil with AllTerminal false. It returns
// an error only when the API never answered (the recorded op then has
// AllTerminal false and no Pending list, which checkers must read as
// unknown) or when ctx ended.
//
// With a step timeout in t.Saga it also watches the pending sagas (see
// watch.go): it stops early, before the deadline, once every pending saga
// is proven stuck — unchanged (status, trail, its outbox rows) for k step
// timeouts with every component healthy — and records what it saw of each.
func Quiesce(ctx context.Context, rec *models.Recorder, t Target, deadline, poll time.Duration) (models.Quiesce, error) {
	if t.Saga == nil {
		return models.Quiesce{AllTerminal: true}, nil
	}
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var (
		q       = models.Quiesce{DeadlineMS: deadline.Milliseconds()}
		answers int
		lastErr error
		w       = newSagaWatch(rec, t)
	)
	defer w.close()
	for {
		sagas, _, err := listSagas(dctx, t)
		if err == nil {
			answers++
			q.Pending = q.Pending[:0]
			var pending []sagaView
			for _, o := range sagas {
				if !t.Saga.Terminal(o.Status) {
					q.Pending = append(q.Pending, o.ID)
					pending = append(pending, o)
				}
			}
			if len(q.Pending) == 0 {
				q.AllTerminal = true
				q.Pending = nil
				break
			}
			if w != nil && w.observe(dctx, pending) {
				q.EarlyStop = true
				break
			}
		} else {
			// A poll cut short by our own deadline says nothing about the
			// API: keep the cause of the polls before it.
			if dctx.Err() == nil || lastErr == nil {
				lastErr = err
			}
			t.logger().Debug("quiesce poll failed", "err", err)
		}
		timer := time.NewTimer(poll)
		select {
		case <-dctx.Done():
			timer.Stop()
		case <-timer.C:
			continue
		}
		break
	}
	q.WaitedMS = time.Since(start).Milliseconds()
	if answers == 0 && lastErr != nil {
		q.Error = "the target's API never answered: " + lastErr.Error()
	}
	if w != nil {
		w.fill(&q)
	}
	rec.Record(models.ProcObserver, models.State, models.FQuiesce, "", q)
	switch {
	case ctx.Err() != nil:
		return q, fmt.Errorf("quiesce interrupted after %d ms: %w", q.WaitedMS, ctx.Err())
	case answers == 0:
		return q, fmt.Errorf("quiesce: the target's API never answered in %v: %w", deadline, lastErr)
	}
	return q, nil
}

// Observe records, in this order: the plan (FObservePlan: every closing
// snapshot it is going to write, so that a checker can tell a complete
// observation from a cut-off one); the drain watch of every outbox
// (FOutboxDrain, drain.go); every declared consumer group's committed
// offsets, once it caught up (FConsumerOffsets, offsets.go); every Kafka
// record of every topic (events, then one FKafkaSnapshot); every saga the
// target reports (FOrderState, then FOrdersSnapshot; none for an
// outbox-only target); each counted resource's rows (FResourceState, then
// FResourceSnapshot); outbox
// rows per query (FOutboxRow, then FOutboxSnapshot); applied rows per query
// (FApplied, then FAppliedSnapshot). A part that fails is recorded as a
// snapshot with Error and Complete=false and the rest goes on; Observe
// returns an error only when ctx ended or the recorder could not write.
//
// The outbox is read twice, around the Kafka read, because the target may
// still be publishing after its sagas ended (a relay publishes a saga's last
// event after the saga's final commit). A recorded row's Published says it
// was published in the read BEFORE the Kafka log was read, so such a row
// missing from the log is proof of loss; the rows themselves come from the
// read AFTER, so an event whose row is missing is proof of a phantom.
// The drain watch is the first read: it waits (bounded) for the outboxes to
// drain, and its last poll is the read before the log. The offsets are read
// before any applied snapshot, so a record below them was applied (if it
// ever will be) before the applied records are read.
func Observe(ctx context.Context, rec *models.Recorder, t Target) error {
	t = t.withDecl(rec)
	t, closeTail := withLogTail(t)
	defer closeTail()
	rec.Record(models.ProcObserver, models.State, models.FObservePlan, "", models.ObservePlan{Snapshots: plan(t)})
	before := drainWatch(ctx, rec, t)
	observeOffsets(ctx, rec, t)
	observeKafka(ctx, rec, t)
	if t.Saga != nil {
		observeOrders(ctx, rec, t)
	}
	for _, r := range t.Resources {
		observeResource(ctx, rec, t, r)
	}
	for _, q := range t.Observe.Outbox {
		observeOutbox(ctx, rec, t, q, before[q.DB])
	}
	for _, q := range t.Observe.Applied {
		observeApplied(ctx, rec, t, q)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("observe interrupted: %w", err)
	}
	if err := rec.Err(); err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	return nil
}

func observeOrders(ctx context.Context, rec *models.Recorder, t Target) {
	sagas, complete, err := listSagas(ctx, t)
	if err != nil && len(sagas) == 0 {
		t.logger().Warn("observe sagas failed", "err", err)
		rec.Record(models.ProcObserver, models.State, FOrdersSnapshot, "", Snapshot{Error: err.Error()})
		return
	}
	for _, o := range sagas {
		rec.Record(models.ProcObserver, models.State, models.FOrderState, o.ID, models.OrderState{
			Status: o.Status, IdempotencyKey: o.Key, Trail: o.Trail,
		})
	}
	snap := Snapshot{Rows: len(sagas), Complete: complete}
	if err != nil {
		snap.Error = err.Error()
	} else if !complete {
		snap.Error = "read saga by saga: a saga the clients were not told of may exist"
	}
	rec.Record(models.ProcObserver, models.State, FOrdersSnapshot, "", snap)
}

// plan lists the closing snapshots Observe writes for t: the log; the saga
// list when the target declares a saga; one resource:<name> per counted
// resource it reads; per outbox its drain watch and rows; per declared
// group its offsets; per applied query its records.
func plan(t Target) []string {
	out := []string{models.SnapKafka}
	if t.Saga != nil {
		out = append(out, models.SnapOrders)
	}
	for _, r := range t.Resources {
		out = append(out, models.SnapResourcePfx+r.Name)
	}
	for _, q := range t.Observe.Outbox {
		out = append(out, models.SnapDrainPfx+q.DB, models.SnapOutboxPfx+q.DB)
	}
	for _, g := range groups(t) {
		out = append(out, models.SnapOffsetPfx+g.Group)
	}
	for _, q := range t.Observe.Applied {
		out = append(out, models.SnapApplied+q.DB)
	}
	return out
}

// historyT is now on the history's clock (Op.T).
func historyT(rec *models.Recorder) int64 { return int64(time.Since(rec.Start())) }

// withDecl fills t.Decl from the history's target op when the caller gave
// none: the declarations the checkers read are the ones the waits use.
func (t Target) withDecl(rec *models.Recorder) Target {
	if t.Decl != nil {
		return t
	}
	for _, op := range rec.Ops() {
		if op.Proc == models.ProcHarness && op.Type == models.Info && op.F == models.FTarget {
			var d models.TargetDecl
			if op.Decode(&d) == nil {
				t.Decl = &d
			}
			break
		}
	}
	return t
}
