// Package payment is the payment service: it charges the order at the
// gateway (T3, the pivot) and answers the orchestrator's CancelCharge.
//
// The gateway call carries the key "charge:<order>" and is retried with it
// until the answer is definite (succeeded or declined), so an ambiguous
// failure never turns into a second charge. CancelCharge decides per order
// under a row lock: if the order was never charged it leaves a tombstone
// (a later ChargePayment is refused without calling the gateway) and
// answers PaymentCancelled; if it was charged it answers PaymentCharged and
// the saga goes forward. A successful charge is never refunded.
package payment

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
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/world"
)

// Name is the service name: its source header, topic and consumer group.
const Name = "payment"

// Schema is the payment database schema (plus outbox and inbox).
const Schema = outbox.Schema + `
CREATE TABLE IF NOT EXISTS payments (
	order_id   text PRIMARY KEY,
	status     text NOT NULL, -- CHARGED, DECLINED, CANCELLED
	charge_id  text,
	amount     bigint NOT NULL DEFAULT 0,
	updated_at timestamptz NOT NULL DEFAULT now()
);
`

// Types are the messages the service consumes.
var Types = map[string]bool{msg.ChargePayment: true, msg.CancelCharge: true, msg.RefundPayment: true}

// Service handles payment messages.
type Service struct {
	DB      *pgxpool.Pool
	Gateway *world.Client
	Log     *slog.Logger
}

var replyFor = map[string]string{"CHARGED": msg.PaymentCharged, "DECLINED": msg.PaymentDeclined, "CANCELLED": msg.PaymentCancelled}

// Handle applies one message.
func (s *Service) Handle(ctx context.Context, e consumer.Envelope) error {
	var p msg.Payload
	if err := json.Unmarshal(e.Value, &p); err != nil {
		s.Log.Error("skip undecodable payload", "event_id", e.EventID, "err", err)
		return nil
	}
	if seen, err := consumer.Seen(ctx, s.DB, Name, e); err != nil || seen {
		if seen {
			failpoint.Reached("payment.redelivered")
		}
		return err
	}
	if e.Type == msg.RefundPayment {
		return s.refund(ctx, e, p)
	}
	var status, chargeID string
	if e.Type == msg.ChargePayment {
		st, id, err := s.load(ctx, s.DB, p.OrderID, false)
		if err != nil {
			return err
		}
		if st == "" {
			// Not decided yet: ask the gateway (idempotently) first.
			key := "charge:" + p.OrderID
			if mutant.Is(mutant.NoGatewayIdempotencyKey) {
				key = "" // planted bug: a retry after a timeout charges again
			}
			a, err := s.Gateway.Call(ctx, "/charges", key, map[string]any{"order_id": p.OrderID, "amount": p.Total, "card": p.Card}, 402)
			if err != nil {
				return fmt.Errorf("charge %s: %w", p.OrderID, err)
			}
			status, chargeID = "DECLINED", a.Str("id")
			if a.Status/100 == 2 {
				status = "CHARGED"
			} else {
				failpoint.Reached("payment.declined")
			}
			if err := failpoint.Inject("payment.after-charge"); err != nil {
				return err
			}
		} else {
			status, chargeID = st, id
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
			failpoint.Reached("payment.redelivered")
			err = tx.Commit(ctx)
		}
		return err
	}
	cur, curID, err := s.load(ctx, tx, p.OrderID, true)
	if err != nil {
		return err
	}
	if cur != "" && e.Type == msg.CancelCharge {
		failpoint.Reached("payment.cancel-decided")
	}
	switch {
	case cur != "":
		// Decided before (an earlier command, or the tombstone): the stored
		// decision wins and is answered again.
		if cur == "CANCELLED" && status == "CHARGED" {
			s.Log.Error("charge succeeded after a cancel tombstone; answering charged so the saga goes forward", "order", p.OrderID)
			if _, err := tx.Exec(ctx, `UPDATE payments SET status = 'CHARGED', charge_id = $2, amount = $3, updated_at = now() WHERE order_id = $1`, p.OrderID, chargeID, p.Total); err != nil {
				return fmt.Errorf("update payment %s: %w", p.OrderID, err)
			}
			cur, curID = "CHARGED", chargeID
		}
		status, chargeID = cur, curID
	case e.Type == msg.CancelCharge:
		status = "CANCELLED"
		fallthrough
	default:
		if _, err := tx.Exec(ctx, `INSERT INTO payments (order_id, status, charge_id, amount) VALUES ($1, $2, NULLIF($3, ''), $4)`,
			p.OrderID, status, chargeID, p.Total); err != nil {
			return fmt.Errorf("insert payment %s: %w", p.OrderID, err)
		}
	}
	reply := msg.Payload{OrderID: p.OrderID, ChargeID: chargeID}
	if status == "DECLINED" {
		reply.Reason = "card_declined"
	}
	if _, err := outbox.Add(ctx, tx, Name, outbox.Message{Topic: msg.TopicPayment, Type: replyFor[status], Payload: reply}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit %s for %s: %w", e.Type, p.OrderID, err)
	}
	return failpoint.Inject("payment.after-commit")
}

type querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

func (s *Service) load(ctx context.Context, q querier, order string, lock bool) (string, string, error) {
	sql := `SELECT status, coalesce(charge_id, '') FROM payments WHERE order_id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	var st, id string
	err := q.QueryRow(ctx, sql, order).Scan(&st, &id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("load payment %s: %w", order, err)
	}
	return st, id, nil
}

// refund gives a settled charge back at the gateway (key "refund:<order>",
// so a redelivered command refunds once) and answers PaymentRefunded. An
// order that was never charged has nothing to give back and is answered
// PaymentCancelled.
func (s *Service) refund(ctx context.Context, e consumer.Envelope, p msg.Payload) error {
	st, chargeID, err := s.load(ctx, s.DB, p.OrderID, false)
	if err != nil {
		return err
	}
	if st == "CHARGED" && chargeID != "" {
		if _, err := s.Gateway.Call(ctx, "/refunds", "refund:"+p.OrderID,
			map[string]any{"charge_id": chargeID, "amount": p.Total, "order_id": p.OrderID}); err != nil {
			return fmt.Errorf("refund %s: %w", p.OrderID, err)
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
			err = tx.Commit(ctx)
		}
		return err
	}
	reply := msg.PaymentCancelled
	if st == "CHARGED" || st == "REFUNDED" {
		reply = msg.PaymentRefunded
		if _, err := tx.Exec(ctx, `UPDATE payments SET status = 'REFUNDED', updated_at = now() WHERE order_id = $1`, p.OrderID); err != nil {
			return fmt.Errorf("mark refunded %s: %w", p.OrderID, err)
		}
	}
	if _, err := outbox.Add(ctx, tx, Name, outbox.Message{Topic: msg.TopicPayment, Type: reply, Payload: msg.Payload{OrderID: p.OrderID, ChargeID: chargeID}}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit refund of %s: %w", p.OrderID, err)
	}
	return nil
}
