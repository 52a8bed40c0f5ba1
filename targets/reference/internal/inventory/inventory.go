// Package inventory is the stock service: it reserves stock for an order
// (T2) and releases it (C2). Stock rows are locked (SELECT … FOR UPDATE,
// in SKU order so two orders cannot deadlock) before they are checked and
// changed, so available stock never goes negative under concurrency; held
// stock is visible in the reserved column (the semantic lock).
//
// A release for an order whose reservation never happened (the
// orchestrator timed out) leaves a tombstone, so a late reserve is refused
// instead of holding stock for a cancelled order.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets/reference/internal/consumer"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
)

// Name is the service name: its source header, topic and consumer group.
const Name = "inventory"

// Schema is the inventory database schema (plus outbox and inbox).
const Schema = outbox.Schema + `
CREATE TABLE IF NOT EXISTS stock (
	sku       text PRIMARY KEY,
	available bigint NOT NULL,
	reserved  bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS reservations (
	order_id   text PRIMARY KEY,
	status     text NOT NULL, -- RESERVED, FAILED, RELEASED
	items      jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
`

// ObserveStockSQL is the observer's stock query.
const ObserveStockSQL = `SELECT sku, available, reserved FROM stock ORDER BY sku`

// Reply types beyond msg: StockNotReserved answers a release for an order
// that holds nothing, so no "released" event is published for a step that
// never ran.
const StockNotReserved = "StockNotReserved"

// Service handles inventory messages.
type Service struct {
	DB  *pgxpool.Pool
	Log *slog.Logger
}

// Seed inserts the initial stock; existing rows are kept, so a restart
// does not reset stock.
func (s *Service) Seed(ctx context.Context, stock map[string]int64) error {
	for sku, n := range stock {
		if _, err := s.DB.Exec(ctx, `INSERT INTO stock (sku, available) VALUES ($1, $2) ON CONFLICT (sku) DO NOTHING`, sku, n); err != nil {
			return fmt.Errorf("seed stock %s: %w", sku, err)
		}
	}
	return nil
}

// Types are the messages the service consumes.
var Types = map[string]bool{msg.ReserveStock: true, msg.ReleaseStock: true}

// Handle applies one message.
func (s *Service) Handle(ctx context.Context, e consumer.Envelope) error {
	var p msg.Payload
	if err := json.Unmarshal(e.Value, &p); err != nil {
		s.Log.Error("skip undecodable payload", "event_id", e.EventID, "err", err)
		return nil
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	fresh, err := consumer.Claim(ctx, tx, Name, e)
	if err != nil {
		return err
	}
	if mutant.Is(mutant.NonIdempotentCompensation) && e.Type == msg.ReleaseStock {
		fresh = true // planted bug: a redelivered release is applied again
	}
	if !fresh {
		failpoint.Reached("inventory.redelivered")
		return tx.Commit(ctx)
	}
	var status string
	var itemsRaw []byte
	err = tx.QueryRow(ctx, `SELECT status, items FROM reservations WHERE order_id = $1 FOR UPDATE`, p.OrderID).Scan(&status, &itemsRaw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("load reservation %s: %w", p.OrderID, err)
	}
	reply := msg.Payload{OrderID: p.OrderID}
	var replyType string
	switch e.Type {
	case msg.ReserveStock:
		if mutant.Is(mutant.NonIdempotentConsumer) {
			// Planted bug: without the processed-messages table the handler
			// trusts every delivery and reserves again.
			status = ""
			if _, err := tx.Exec(ctx, `DELETE FROM reservations WHERE order_id = $1`, p.OrderID); err != nil {
				return fmt.Errorf("mutant: %w", err)
			}
		}
		switch status {
		case "RESERVED":
			replyType = msg.StockReserved
		case "FAILED":
			replyType, reply.Reason = msg.StockReserveFailed, "out_of_stock"
		case "RELEASED":
			replyType, reply.Reason = msg.StockReserveFailed, "already_released"
		default:
			ok, err := s.reserve(ctx, tx, p.Items)
			if err != nil {
				return err
			}
			st := "FAILED"
			replyType, reply.Reason = msg.StockReserveFailed, "out_of_stock"
			if ok {
				st, replyType, reply.Reason = "RESERVED", msg.StockReserved, ""
			} else {
				failpoint.Reached("inventory.out-of-stock")
			}
			items, _ := json.Marshal(p.Items)
			if _, err := tx.Exec(ctx, `INSERT INTO reservations (order_id, status, items) VALUES ($1, $2, $3)`, p.OrderID, st, items); err != nil {
				return fmt.Errorf("insert reservation %s: %w", p.OrderID, err)
			}
		}
	case msg.ReleaseStock:
		switch status {
		case "RESERVED":
			var items []models.Item
			if err := json.Unmarshal(itemsRaw, &items); err != nil {
				return fmt.Errorf("decode reservation %s: %w", p.OrderID, err)
			}
			if err := s.release(ctx, tx, items); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE reservations SET status = 'RELEASED', updated_at = now() WHERE order_id = $1`, p.OrderID); err != nil {
				return fmt.Errorf("mark released %s: %w", p.OrderID, err)
			}
			replyType = msg.StockReleased
		case "RELEASED":
			// Already released (or tombstoned): answer again, change nothing.
			failpoint.Reached("inventory.release-again")
			replyType = StockNotReserved
			if len(itemsRaw) > 2 {
				replyType = msg.StockReleased
				if mutant.Is(mutant.NonIdempotentCompensation) {
					// Planted bug: the compensation does not check it already ran.
					var items []models.Item
					if err := json.Unmarshal(itemsRaw, &items); err != nil {
						return fmt.Errorf("decode reservation %s: %w", p.OrderID, err)
					}
					if err := s.release(ctx, tx, items); err != nil {
						return err
					}
				}
			}
		case "FAILED":
			failpoint.Reached("inventory.release-unreserved")
			replyType = StockNotReserved
		default:
			replyType = StockNotReserved
			if mutant.Is(mutant.OutOfOrderCompensation) {
				// Planted bug: nothing is held, so the release "succeeded";
				// no tombstone, so a reserve arriving later holds stock for
				// a cancelled order.
				replyType = msg.StockReleased
				break
			}
			if _, err := tx.Exec(ctx, `INSERT INTO reservations (order_id, status, items) VALUES ($1, 'RELEASED', '[]')`, p.OrderID); err != nil {
				return fmt.Errorf("insert release tombstone %s: %w", p.OrderID, err)
			}
		}
	}
	if _, err := outbox.Add(ctx, tx, Name, outbox.Message{Topic: msg.TopicInventory, Type: replyType, Payload: reply}); err != nil {
		return err
	}
	if err := failpoint.Inject("inventory.after-apply-before-commit"); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit %s for %s: %w", e.Type, p.OrderID, err)
	}
	return failpoint.Inject("inventory.after-commit")
}

// need sums the quantities per SKU, in SKU order (the lock order).
func need(items []models.Item) ([]string, map[string]int64) {
	q := map[string]int64{}
	for _, it := range items {
		q[it.SKU] += int64(it.Qty)
	}
	skus := make([]string, 0, len(q))
	for k := range q {
		skus = append(skus, k)
	}
	sort.Strings(skus)
	return skus, q
}

// reserve holds the items if every SKU has enough available stock.
func (s *Service) reserve(ctx context.Context, tx pgx.Tx, items []models.Item) (bool, error) {
	skus, q := need(items)
	lock := ` FOR UPDATE`
	if mutant.Is(mutant.NoSemanticLock) {
		lock = `` // planted bug: check-then-act without a row lock
	}
	rows, err := tx.Query(ctx, `SELECT sku, available, reserved FROM stock WHERE sku = ANY($1) ORDER BY sku`+lock, skus)
	if err != nil {
		return false, fmt.Errorf("lock stock: %w", err)
	}
	avail := map[string][2]int64{}
	for rows.Next() {
		var sku string
		var a, r int64
		if err := rows.Scan(&sku, &a, &r); err != nil {
			rows.Close()
			return false, fmt.Errorf("scan stock: %w", err)
		}
		avail[sku] = [2]int64{a, r}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("lock stock: %w", err)
	}
	for _, sku := range skus {
		v, ok := avail[sku]
		if !ok || v[0] < q[sku] {
			return false, nil
		}
	}
	for _, sku := range skus {
		var err error
		if mutant.Is(mutant.NoSemanticLock) {
			v := avail[sku]
			_, err = tx.Exec(ctx, `UPDATE stock SET available = $2, reserved = $3 WHERE sku = $1`, sku, v[0]-q[sku], v[1]+q[sku])
		} else {
			_, err = tx.Exec(ctx, `UPDATE stock SET available = available - $2, reserved = reserved + $2 WHERE sku = $1`, sku, q[sku])
		}
		if err != nil {
			return false, fmt.Errorf("reserve %s: %w", sku, err)
		}
	}
	return true, nil
}

func (s *Service) release(ctx context.Context, tx pgx.Tx, items []models.Item) error {
	skus, q := need(items)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = ANY($1) ORDER BY sku FOR UPDATE`, skus); err != nil {
		return fmt.Errorf("lock stock: %w", err)
	}
	for _, sku := range skus {
		if _, err := tx.Exec(ctx, `UPDATE stock SET available = available + $2, reserved = reserved - $2 WHERE sku = $1`, sku, q[sku]); err != nil {
			return fmt.Errorf("release %s: %w", sku, err)
		}
	}
	return nil
}

// Routes adds GET /stock and GET /stock/{sku} (inspection) to mux.
func (s *Service) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /stock/{sku}", func(w http.ResponseWriter, r *http.Request) {
		var st models.StockState
		err := s.DB.QueryRow(r.Context(), `SELECT sku, available, reserved FROM stock WHERE sku = $1`, r.PathValue("sku")).Scan(&st.SKU, &st.Available, &st.Reserved)
		if errors.Is(err, pgx.ErrNoRows) {
			writeJSON(w, http.StatusNotFound, map[string]string{"code": "not_found", "error": "unknown sku"})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /stock", func(w http.ResponseWriter, r *http.Request) {
		rows, err := s.DB.Query(r.Context(), ObserveStockSQL)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": err.Error()})
			return
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (models.StockState, error) {
			var st models.StockState
			return st, r.Scan(&st.SKU, &st.Available, &st.Reserved)
		})
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
