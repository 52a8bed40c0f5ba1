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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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

// Terminal order statuses (docs/target-contract.md).
const (
	StatusApproved  = "APPROVED"
	StatusCancelled = "CANCELLED"
	StatusPending   = "PENDING"
)

// Target is what the observer needs to know about a running target.
type Target struct {
	// APIURL is the base URL of the workload API (GET /orders).
	APIURL string
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
	// before they are read (default 15 s).
	DrainWait time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (t Target) httpClient() *http.Client {
	if t.HTTPClient != nil {
		return t.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

func (t Target) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// apiOrder is one element of GET /orders.
type apiOrder struct {
	ID             string        `json:"id"`
	Status         string        `json:"status"`
	IdempotencyKey string        `json:"idempotency_key"`
	Customer       string        `json:"customer"`
	Items          []models.Item `json:"items"`
	Card           string        `json:"card"`
	Total          int64         `json:"total"`
	Trail          []string      `json:"trail"`
}

// listOrders fetches GET /orders, sorted by id so the history does not
// depend on the target's map order.
func listOrders(ctx context.Context, t Target) ([]apiOrder, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(t.APIURL, "/")+"/orders", nil)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	resp, err := t.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("list orders: read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b := string(body)
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		return nil, fmt.Errorf("list orders: GET /orders answered %d: %s", resp.StatusCode, b)
	}
	var out []apiOrder
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("list orders: decode reply: %w", err)
	}
	for i, o := range out {
		if o.ID == "" {
			return nil, fmt.Errorf("list orders: element %d has no id", i)
		}
	}
	slices.SortFunc(out, func(a, b apiOrder) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Quiesce polls GET /orders every poll until every order the target knows is
// APPROVED or CANCELLED, or until deadline, and records the outcome as one
// FQuiesce state op. A deadline reached with sagas still pending is a
// finding, not an error: it returns nil with AllTerminal false. It returns
// an error only when the API never answered (the recorded op then has
// AllTerminal false and no Pending list, which checkers must read as
// unknown) or when ctx ended.
func Quiesce(ctx context.Context, rec *models.Recorder, t Target, deadline, poll time.Duration) (models.Quiesce, error) {
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
	)
	for {
		orders, err := listOrders(dctx, t)
		if err == nil {
			answers++
			q.Pending = q.Pending[:0]
			for _, o := range orders {
				if o.Status != StatusApproved && o.Status != StatusCancelled {
					q.Pending = append(q.Pending, o.ID)
				}
			}
			if len(q.Pending) == 0 {
				q.AllTerminal = true
				q.Pending = nil
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
		q.Error = "the orders API never answered: " + lastErr.Error()
	}
	rec.Record(models.ProcObserver, models.State, models.FQuiesce, "", q)
	switch {
	case ctx.Err() != nil:
		return q, fmt.Errorf("quiesce interrupted after %d ms: %w", q.WaitedMS, ctx.Err())
	case answers == 0:
		return q, fmt.Errorf("quiesce: the orders API never answered in %v: %w", deadline, lastErr)
	}
	return q, nil
}

// Observe records, in this order: every Kafka record of every topic (events,
// then one FKafkaSnapshot); every order from GET /orders (FOrderState, then
// FOrdersSnapshot); stock rows (FStockState, then FStockSnapshot); outbox
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
// Before the first read Observe waits (bounded) for the outboxes to drain.
func Observe(ctx context.Context, rec *models.Recorder, t Target) error {
	before := publishedBefore(ctx, t)
	observeKafka(ctx, rec, t)
	observeOrders(ctx, rec, t)
	if q := t.Observe.Stock; q != nil {
		observeStock(ctx, rec, t, *q)
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
	orders, err := listOrders(ctx, t)
	if err != nil {
		t.logger().Warn("observe orders failed", "err", err)
		rec.Record(models.ProcObserver, models.State, FOrdersSnapshot, "", Snapshot{Error: err.Error()})
		return
	}
	for _, o := range orders {
		rec.Record(models.ProcObserver, models.State, models.FOrderState, o.ID, models.OrderState{
			Status: o.Status, IdempotencyKey: o.IdempotencyKey, Customer: o.Customer,
			Items: o.Items, Card: o.Card, Total: o.Total, Trail: o.Trail,
		})
	}
	rec.Record(models.ProcObserver, models.State, FOrdersSnapshot, "", Snapshot{Rows: len(orders), Complete: true})
}
