// Package delivery is the delivery service: it books the shipment at the
// carrier (T4, retriable). The carrier call carries "ship:<order>" and is
// retried with that key until it succeeds; a re-sent ScheduleDelivery for
// an order already booked is answered from the local record.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sagachaos/sagachaos/targets/reference/internal/consumer"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/world"
)

// Name is the service name: its source header, topic and consumer group.
const Name = "delivery"

// Schema is the delivery database schema (plus outbox and inbox).
const Schema = outbox.Schema + `
CREATE TABLE IF NOT EXISTS shipments (
	order_id    text PRIMARY KEY,
	shipment_id text NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);
`

// Types are the messages the service consumes.
var Types = map[string]bool{msg.ScheduleDelivery: true}

// Service handles delivery messages.
type Service struct {
	DB      *pgxpool.Pool
	Carrier *world.Client
	Log     *slog.Logger
}

// Handle applies one message.
func (s *Service) Handle(ctx context.Context, e consumer.Envelope) error {
	var p msg.Payload
	if err := json.Unmarshal(e.Value, &p); err != nil {
		s.Log.Error("skip undecodable payload", "event_id", e.EventID, "err", err)
		return nil
	}
	if seen, err := consumer.Seen(ctx, s.DB, Name, e); err != nil || seen {
		if seen {
			failpoint.Reached("delivery.redelivered")
		}
		return err
	}
	var shipID string
	err := s.DB.QueryRow(ctx, `SELECT shipment_id FROM shipments WHERE order_id = $1`, p.OrderID).Scan(&shipID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("load shipment %s: %w", p.OrderID, err)
	}
	if shipID != "" {
		failpoint.Reached("delivery.already-booked")
	}
	if shipID == "" {
		a, err := s.Carrier.Call(ctx, "/shipments", "ship:"+p.OrderID, map[string]any{"order_id": p.OrderID, "items": p.Items})
		if err != nil {
			return fmt.Errorf("book shipment %s: %w", p.OrderID, err)
		}
		shipID = a.Str("id")
		if shipID == "" {
			shipID = "unknown"
		}
		if err := failpoint.Inject("delivery.after-ship"); err != nil {
			return err
		}
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	fresh, err := consumer.Claim(ctx, tx, Name, e)
	if err != nil || !fresh {
		if err == nil {
			failpoint.Reached("delivery.redelivered")
			err = tx.Commit(ctx)
		}
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO shipments (order_id, shipment_id) VALUES ($1, $2) ON CONFLICT (order_id) DO NOTHING`, p.OrderID, shipID); err != nil {
		return fmt.Errorf("insert shipment %s: %w", p.OrderID, err)
	}
	if _, err := outbox.Add(ctx, tx, Name, outbox.Message{Topic: msg.TopicDelivery, Type: msg.DeliveryScheduled,
		Payload: msg.Payload{OrderID: p.OrderID, ShipmentID: shipID}}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit shipment %s: %w", p.OrderID, err)
	}
	return failpoint.Inject("delivery.after-commit")
}
