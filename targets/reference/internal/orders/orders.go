// Package orders is the order service: the workload API (T1 create order)
// and the saga orchestrator.
//
// The orchestrator keeps one durable row per saga (table sagas: state and
// step deadline). Every transition — a reply consumed, a step timing out —
// is one local transaction that locks the saga row, checks the state,
// writes the next command into the outbox and saves the new state, so a
// restarted orchestrator resumes every saga from the table and a late or
// duplicated reply for a saga that moved on is recognised and ignored.
//
// States and transitions (the pivot is the charge):
//
//	RESERVING          StockReserved → CHARGING (ChargePayment)
//	                   StockReserveFailed → CANCELLED
//	                   timeout → RELEASING (ReleaseStock: inventory tombstones)
//	CHARGING           PaymentCharged → DELIVERING (ScheduleDelivery)
//	                   PaymentDeclined/Cancelled → RELEASING (ReleaseStock)
//	                   timeout → CANCELLING_CHARGE (CancelCharge: the charge
//	                   may have happened; payment decides atomically)
//	CANCELLING_CHARGE  as CHARGING; timeout → CancelCharge again
//	RELEASING          StockReleased/StockNotReserved → CANCELLED
//	                   timeout → ReleaseStock again (compensations retry)
//	DELIVERING         DeliveryScheduled → EMAILING; timeout → ScheduleDelivery again
//	EMAILING           e-mail sent with key email:<order> → APPROVED
package orders

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets/reference/internal/consumer"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/inventory"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/world"
)

// Name is the service name: its source header, topic and consumer group.
const Name = "orders"

// Schema is the orders database schema (plus outbox and inbox).
const Schema = outbox.Schema + `
CREATE TABLE IF NOT EXISTS orders (
	id              text PRIMARY KEY,
	idempotency_key text NOT NULL UNIQUE,
	request_hash    text NOT NULL,
	customer        text NOT NULL,
	items           jsonb NOT NULL,
	card            text NOT NULL,
	total           bigint NOT NULL,
	status          text NOT NULL,
	trail           text[] NOT NULL DEFAULT '{}',
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS sagas (
	order_id   text PRIMARY KEY REFERENCES orders (id),
	state      text NOT NULL,
	deadline   timestamptz NOT NULL,
	attempts   int NOT NULL DEFAULT 0,
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS sagas_in_flight ON sagas (deadline) WHERE state NOT IN ('APPROVED', 'CANCELLED');
`

// processStart is when this orchestrator process started (used only by
// the volatile-saga-state mutant).
var processStart = time.Now()

// Saga states.
const (
	Reserving        = "RESERVING"
	Charging         = "CHARGING"
	CancellingCharge = "CANCELLING_CHARGE"
	Releasing        = "RELEASING"
	Delivering       = "DELIVERING"
	Emailing         = "EMAILING"
	Approved         = models.StatusApproved
	Cancelled        = models.StatusCancelled
)

// Types are the replies the orchestrator consumes.
var Types = map[string]bool{
	msg.StockReserved: true, msg.StockReserveFailed: true, msg.StockReleased: true, inventory.StockNotReserved: true,
	msg.PaymentCharged: true, msg.PaymentDeclined: true, msg.PaymentCancelled: true,
	msg.DeliveryScheduled: true,
}

// Service is the order service.
type Service struct {
	DB          *pgxpool.Pool
	Mailer      *world.Client
	Log         *slog.Logger
	StepTimeout time.Duration
}

// Order is the API's view of an order.
type Order struct {
	ID             string        `json:"id"`
	Status         string        `json:"status"`
	IdempotencyKey string        `json:"idempotency_key"`
	Customer       string        `json:"customer"`
	Items          []models.Item `json:"items"`
	Card           string        `json:"card"`
	Total          int64         `json:"total"`
	Trail          []string      `json:"trail"`
}

type placeReq struct {
	Customer string        `json:"customer"`
	Items    []models.Item `json:"items"`
	Card     string        `json:"card"`
	Total    int64         `json:"total"`
}

func apiError(w http.ResponseWriter, code int, c, m string) {
	writeJSON(w, code, map[string]string{"code": c, "error": m})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Routes adds the workload API to mux.
func (s *Service) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /orders", s.place)
	mux.HandleFunc("GET /orders/{id}", s.get)
	mux.HandleFunc("GET /orders", s.list)
}

func (s *Service) place(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "Idempotency-Key header is required")
		return
	}
	var req placeReq
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	if req.Customer == "" || req.Card == "" || len(req.Items) == 0 || req.Total < 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "customer, card and at least one item are required; total must be ≥ 0")
		return
	}
	for _, it := range req.Items {
		if it.SKU == "" || it.Qty <= 0 {
			apiError(w, http.StatusBadRequest, "bad_request", "every item needs a sku and a qty > 0")
			return
		}
	}
	canon, _ := json.Marshal(req)
	sum := sha256.Sum256(canon)
	hash := hex.EncodeToString(sum[:])
	ctx := r.Context()
	id, created, err := s.create(ctx, key, hash, req)
	if err != nil {
		s.Log.Warn("create order", "key", key, "err", err)
		apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	if created {
		if err := failpoint.Inject("orders.after-create"); err != nil {
			apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": models.StatusPending})
		return
	}
	var prevHash string
	if err := s.DB.QueryRow(ctx, `SELECT id, request_hash FROM orders WHERE idempotency_key = $1`, key).Scan(&id, &prevHash); err != nil {
		apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	if prevHash != hash {
		apiError(w, http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
		return
	}
	failpoint.Reached("orders.replayed-create")
	w.Header().Set("Idempotent-Replayed", "true")
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": models.StatusPending})
}

// create runs T1: the order (PENDING), its saga row and the first command,
// in one transaction. The unique idempotency key makes a concurrent repeat
// wait for this insert and then create nothing.
func (s *Service) create(ctx context.Context, key, hash string, req placeReq) (string, bool, error) {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return "", false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	items, _ := json.Marshal(req.Items)
	var id string
	err = tx.QueryRow(ctx, `INSERT INTO orders (id, idempotency_key, request_hash, customer, items, card, total, status, trail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'PENDING', ARRAY['create-order'])
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
		msg.NewID("o-"), key, hash, req.Customer, items, req.Card, req.Total).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("insert order: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO sagas (order_id, state, deadline) VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
		id, Reserving, s.StepTimeout.Milliseconds()); err != nil {
		return "", false, fmt.Errorf("insert saga: %w", err)
	}
	p := msg.Payload{OrderID: id, Customer: req.Customer, Items: req.Items, Card: req.Card, Total: req.Total}
	for _, t := range []string{msg.OrderCreated, msg.ReserveStock} {
		if _, err := outbox.Add(ctx, tx, Name, outbox.Message{Topic: msg.TopicOrders, Type: t, Payload: p}); err != nil {
			return "", false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return "", false, fmt.Errorf("commit order: %w", err)
	}
	return id, true, nil
}

const selectOrder = `SELECT id, status, idempotency_key, customer, items, card, total, trail FROM orders`

func scanOrder(r pgx.Row) (Order, error) {
	var o Order
	var items []byte
	if err := r.Scan(&o.ID, &o.Status, &o.IdempotencyKey, &o.Customer, &items, &o.Card, &o.Total, &o.Trail); err != nil {
		return o, err
	}
	if err := json.Unmarshal(items, &o.Items); err != nil {
		return o, fmt.Errorf("decode items of %s: %w", o.ID, err)
	}
	return o, nil
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	o, err := scanOrder(s.DB.QueryRow(r.Context(), selectOrder+` WHERE id = $1`, r.PathValue("id")))
	if errors.Is(err, pgx.ErrNoRows) {
		apiError(w, http.StatusNotFound, "not_found", "no such order")
		return
	}
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	// ?idempotency_key=K narrows the list to the order made with K (the
	// observer uses it to settle a client op whose answer was lost).
	var rows pgx.Rows
	var err error
	if k := r.URL.Query().Get("idempotency_key"); k != "" {
		rows, err = s.DB.Query(r.Context(), selectOrder+` WHERE idempotency_key = $1`, k)
	} else {
		rows, err = s.DB.Query(r.Context(), selectOrder+` ORDER BY created_at, id`)
	}
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) { return scanOrder(r) })
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	if out == nil {
		out = []Order{}
	}
	writeJSON(w, http.StatusOK, out)
}

// saga is a locked saga row with its order.
type saga struct {
	state string
	order msg.Payload
}

type step struct {
	tx  pgx.Tx
	s   *Service
	sg  *saga
	ctx context.Context
}

func (st step) send(t string) error {
	_, err := outbox.Add(st.ctx, st.tx, Name, outbox.Message{Topic: msg.TopicOrders, Type: t, Payload: st.sg.order})
	return err
}

// to saves the new state with a fresh step deadline.
func (st step) to(state string) error {
	_, err := st.tx.Exec(st.ctx, `UPDATE sagas SET state = $2, deadline = now() + $3 * interval '1 millisecond', attempts = 0, updated_at = now() WHERE order_id = $1`,
		st.sg.order.OrderID, state, st.s.StepTimeout.Milliseconds())
	if err != nil {
		return fmt.Errorf("save saga %s → %s: %w", st.sg.order.OrderID, state, err)
	}
	st.sg.state = state
	return nil
}

func (st step) trail(name string) error {
	_, err := st.tx.Exec(st.ctx, `UPDATE orders SET trail = array_append(trail, $2), updated_at = now() WHERE id = $1`, st.sg.order.OrderID, name)
	if err != nil {
		return fmt.Errorf("trail %s: %w", name, err)
	}
	return nil
}

// finish ends the saga: the order's terminal status and its event.
func (st step) finish(status, trailName, event string) error {
	if _, err := st.tx.Exec(st.ctx, `UPDATE orders SET status = $2, trail = array_append(trail, $3), updated_at = now() WHERE id = $1`,
		st.sg.order.OrderID, status, trailName); err != nil {
		return fmt.Errorf("finish order %s: %w", st.sg.order.OrderID, err)
	}
	if err := st.send(event); err != nil {
		return err
	}
	return st.to(status)
}

// lock loads and locks the saga of order; nil if there is none.
func (s *Service) lock(ctx context.Context, tx pgx.Tx, order string) (*saga, error) {
	var sg saga
	var items []byte
	var touched time.Time
	err := tx.QueryRow(ctx, `SELECT s.state, s.updated_at, o.customer, o.items, o.card, o.total FROM sagas s JOIN orders o ON o.id = s.order_id
		WHERE s.order_id = $1 FOR UPDATE OF s`, order).Scan(&sg.state, &touched, &sg.order.Customer, &items, &sg.order.Card, &sg.order.Total)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock saga %s: %w", order, err)
	}
	if mutant.Is(mutant.VolatileSagaState) && touched.Before(processStart) {
		// Planted bug: saga state lived in memory, so a restarted
		// orchestrator does not know the sagas that were in flight.
		return nil, nil
	}
	sg.order.OrderID = order
	if err := json.Unmarshal(items, &sg.order.Items); err != nil {
		return nil, fmt.Errorf("decode items of %s: %w", order, err)
	}
	return &sg, nil
}

// Handle applies one reply to its saga.
func (s *Service) Handle(ctx context.Context, e consumer.Envelope) error {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	fresh, err := consumer.Claim(ctx, tx, Name, e)
	if err != nil {
		return err
	}
	if !fresh {
		failpoint.Reached("orders.redelivered")
	}
	if fresh {
		sg, err := s.lock(ctx, tx, e.AggregateID)
		if err != nil {
			return err
		}
		if sg == nil {
			s.Log.Error("reply for an unknown saga, ignored", "order", e.AggregateID, "type", e.Type)
		} else if err := s.onReply(ctx, step{tx: tx, s: s, sg: sg, ctx: ctx}, e.Type); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit reply %s for %s: %w", e.Type, e.AggregateID, err)
	}
	return failpoint.Inject("orders.after-state-save")
}

func (s *Service) onReply(ctx context.Context, st step, typ string) error {
	state := st.sg.state
	ignore := func() error {
		failpoint.Reached("orders.late-reply")
		s.Log.Info("late or duplicate reply ignored", "order", st.sg.order.OrderID, "state", state, "type", typ)
		return nil
	}
	switch state {
	case Reserving:
		switch typ {
		case msg.StockReserved:
			if err := st.trail("reserve-stock"); err != nil {
				return err
			}
			if mutant.Is(mutant.EmailBeforePivot) {
				// Planted bug: a non-compensatable effect before the pivot.
				if _, err := s.Mailer.Call(ctx, "/emails", "email:"+st.sg.order.OrderID,
					map[string]any{"order_id": st.sg.order.OrderID, "kind": "confirmation", "to": st.sg.order.Customer}); err != nil {
					return err
				}
			}
			if err := st.send(msg.ChargePayment); err != nil {
				return err
			}
			return st.to(Charging)
		case msg.StockReserveFailed:
			failpoint.Reached("orders.out-of-stock")
			return st.finish(Cancelled, "cancel-order", msg.OrderCancelled)
		}
	case Charging, CancellingCharge:
		switch typ {
		case msg.PaymentCharged:
			if state == CancellingCharge {
				failpoint.Reached("orders.charged-after-timeout")
			}
			if err := st.trail("charge"); err != nil {
				return err
			}
			if err := st.send(msg.ScheduleDelivery); err != nil {
				return err
			}
			return st.to(Delivering)
		case msg.PaymentDeclined, msg.PaymentCancelled:
			if state == CancellingCharge {
				failpoint.Reached("orders.declined-after-timeout")
			} else {
				failpoint.Reached("orders.declined")
			}
			if err := st.send(msg.ReleaseStock); err != nil {
				return err
			}
			return st.to(Releasing)
		}
	case Releasing:
		switch typ {
		case msg.StockReleased:
			if err := st.trail("release-stock"); err != nil {
				return err
			}
			return st.finish(Cancelled, "cancel-order", msg.OrderCancelled)
		case inventory.StockNotReserved:
			failpoint.Reached("orders.release-unreserved")
			return st.finish(Cancelled, "cancel-order", msg.OrderCancelled)
		}
	case Delivering:
		if typ == msg.DeliveryScheduled {
			if err := st.trail("schedule-delivery"); err != nil {
				return err
			}
			if err := st.to(Emailing); err != nil {
				return err
			}
			// Due now: the e-mail loop picks it up at once.
			_, err := st.tx.Exec(ctx, `UPDATE sagas SET deadline = now() WHERE order_id = $1`, st.sg.order.OrderID)
			return err
		}
	}
	return ignore()
}

// onTimeout handles a step whose deadline passed. Before the pivot the
// saga compensates; after it, the command is sent again.
func (s *Service) onTimeout(ctx context.Context, st step) error {
	s.Log.Info("step timed out", "order", st.sg.order.OrderID, "state", st.sg.state)
	if m := timeoutMarker[st.sg.state]; m != "" {
		failpoint.Reached(m)
	}
	if mutant.Is(mutant.CompensationNotRetried) && (st.sg.state == Releasing || st.sg.state == CancellingCharge) {
		// Planted bug: the compensation was tried once and did not answer
		// in time; give up and cancel the order anyway (the charge is
		// never settled, the stock never released).
		return st.finish(Cancelled, "cancel-order", msg.OrderCancelled)
	}
	switch st.sg.state {
	case Reserving, Releasing:
		if err := st.send(msg.ReleaseStock); err != nil {
			return err
		}
		return st.to(Releasing)
	case Charging, CancellingCharge:
		if err := st.send(msg.CancelCharge); err != nil {
			return err
		}
		return st.to(CancellingCharge)
	case Delivering:
		if mutant.Is(mutant.CompensateAfterPivot) {
			// Planted bug: the carrier did not confirm in time, so the
			// saga "rolls back": refund the charge, release the stock and
			// cancel, although the charge was the point of no return.
			for _, t := range []string{msg.RefundPayment, msg.ReleaseStock} {
				if err := st.send(t); err != nil {
					return err
				}
			}
			return st.to(Releasing)
		}
		if err := st.send(msg.ScheduleDelivery); err != nil {
			return err
		}
		return st.to(Delivering)
	}
	return nil
}

// timeoutMarker is the marker of a step timing out, by state.
var timeoutMarker = map[string]string{
	Reserving:        "orders.timeout.reserving",
	Charging:         "orders.timeout.charging",
	CancellingCharge: "orders.timeout.cancelling-charge",
	Releasing:        "orders.timeout.releasing",
	Delivering:       "orders.timeout.delivering",
}

// RunTimers runs the step-timeout loop and the e-mail loop until ctx ends.
func (s *Service) RunTimers(ctx context.Context, tick time.Duration) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.loop(ctx, tick, s.timeouts) }()
	go func() { defer wg.Done(); s.loop(ctx, tick, s.emails) }()
	wg.Wait()
}

func (s *Service) loop(ctx context.Context, tick time.Duration, f func(context.Context) (int, error)) {
	for ctx.Err() == nil {
		n, err := f(ctx)
		if err != nil && ctx.Err() == nil {
			s.Log.Warn("saga timer", "err", err)
		}
		if n == 0 || err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(tick):
			}
		}
	}
}

// timeouts handles up to 100 expired steps, each in its own transaction.
func (s *Service) timeouts(ctx context.Context) (int, error) {
	if mutant.Is(mutant.NoStepTimeout) {
		return 0, nil // planted bug: no step ever times out
	}
	rows, err := s.DB.Query(ctx, `SELECT order_id FROM sagas WHERE state IN ($1, $2, $3, $4, $5) AND deadline < now() ORDER BY deadline LIMIT 100`,
		Reserving, Charging, CancellingCharge, Releasing, Delivering)
	if err != nil {
		return 0, fmt.Errorf("find expired steps: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("find expired steps: %w", err)
	}
	for _, id := range ids {
		if err := s.timeoutOne(ctx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

func (s *Service) timeoutOne(ctx context.Context, id string) error {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	sg, err := s.lock(ctx, tx, id)
	if err != nil || sg == nil {
		return err
	}
	var expired bool
	if err := tx.QueryRow(ctx, `SELECT deadline < now() FROM sagas WHERE order_id = $1`, id).Scan(&expired); err != nil {
		return fmt.Errorf("recheck deadline %s: %w", id, err)
	}
	if !expired { // a reply moved it on meanwhile
		return nil
	}
	if err := s.onTimeout(ctx, step{tx: tx, s: s, sg: sg, ctx: ctx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit timeout of %s: %w", id, err)
	}
	return failpoint.Inject("orders.after-timeout-save")
}

// emails sends the confirmation e-mail of sagas in EMAILING (T5, after the
// pivot: retried until it succeeds) and then approves the order.
func (s *Service) emails(ctx context.Context) (int, error) {
	rows, err := s.DB.Query(ctx, `SELECT s.order_id, o.customer FROM sagas s JOIN orders o ON o.id = s.order_id
		WHERE s.state = $1 AND s.deadline <= now() ORDER BY s.deadline LIMIT 32`, Emailing)
	if err != nil {
		return 0, fmt.Errorf("find e-mails to send: %w", err)
	}
	type job struct{ id, to string }
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job, error) {
		var j job
		return j, r.Scan(&j.id, &j.to)
	})
	if err != nil {
		return 0, fmt.Errorf("find e-mails to send: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 8)
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.approve(ctx, j.id, j.to)
		}()
	}
	wg.Wait()
	return len(jobs), errors.Join(errs...)
}

func (s *Service) approve(ctx context.Context, id, to string) error {
	cctx, cancel := context.WithTimeout(ctx, s.StepTimeout)
	defer cancel()
	if _, err := s.Mailer.Call(cctx, "/emails", "email:"+id, map[string]any{"order_id": id, "kind": "confirmation", "to": to}); err != nil {
		// Retriable: try again after a pause, never give up.
		_, _ = s.DB.Exec(ctx, `UPDATE sagas SET deadline = now() + interval '200 milliseconds', attempts = attempts + 1 WHERE order_id = $1 AND state = $2`, id, Emailing)
		return fmt.Errorf("confirmation e-mail %s: %w", id, err)
	}
	if err := failpoint.Inject("orders.after-email"); err != nil {
		return err
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	sg, err := s.lock(ctx, tx, id)
	if err != nil || sg == nil || sg.state != Emailing {
		return err
	}
	st := step{tx: tx, s: s, sg: sg, ctx: ctx}
	if mutant.Is(mutant.SilentApproval) {
		// Planted bug: the e-mail loop's author approves with a direct
		// update of the order and the saga, bypassing finish — and with it
		// the outbox: nobody ever hears the order was approved.
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = $2, trail = array_append(trail, 'approve'), updated_at = now() WHERE id = $1`, id, Approved); err != nil {
			return fmt.Errorf("approve %s: %w", id, err)
		}
		if err := st.to(Approved); err != nil {
			return err
		}
	} else if err := st.finish(Approved, "approve", msg.OrderApproved); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit approval of %s: %w", id, err)
	}
	return nil
}
