// Package outbox writes messages into a service's transactional outbox.
//
// A service calls Add inside the same transaction as its business change,
// so the message exists if and only if the change committed (no dual
// write). Add assigns the per-aggregate sequence number by upserting a
// counter row in outbox_seq: that row stays locked until the transaction
// ends, so a second transaction for the same aggregate waits, and the
// commit order of one aggregate's rows equals their seq order. The id
// column is a bigserial taken after the counter lock, so within one
// aggregate ids also grow with seq; across aggregates ids may have gaps and
// commit out of order, which is why the relay never relies on them being
// contiguous.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
)

// Schema creates the outbox, its sequence counters and the inbox
// (processed messages) of one service database. Every statement is
// idempotent.
const Schema = `
CREATE TABLE IF NOT EXISTS outbox (
	id           bigserial PRIMARY KEY,
	event_id     text NOT NULL UNIQUE,
	aggregate_id text NOT NULL,
	seq          bigint NOT NULL,
	type         text NOT NULL,
	topic        text NOT NULL,
	source       text NOT NULL,
	payload      jsonb NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now(),
	published_at timestamptz,
	UNIQUE (aggregate_id, seq)
);
CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_published_at ON outbox (published_at) WHERE published_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS outbox_seq (
	aggregate_id text PRIMARY KEY,
	last_seq     bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS inbox (
	position     bigserial PRIMARY KEY,
	consumer     text NOT NULL,
	event_id     text NOT NULL,
	aggregate_id text NOT NULL,
	source       text NOT NULL,
	type         text NOT NULL,
	seq          bigint NOT NULL,
	applied_at   timestamptz NOT NULL DEFAULT now(),
	UNIQUE (consumer, event_id)
);
`

// ObserveSQL is the observer's outbox snapshot query (docs/target-contract.md).
const ObserveSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, published_at IS NOT NULL AS published FROM outbox ORDER BY id`

// ObserveAppliedSQL is the observer's applied-messages query.
const ObserveAppliedSQL = `SELECT consumer, event_id, aggregate_id, source, type, seq, position FROM inbox ORDER BY position`

// Execer is what Add needs: a pgx transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Message is one outbox row to write.
type Message struct {
	Topic   string
	Type    string
	Payload msg.Payload
}

// Add writes m into the outbox inside tx, with source the writing service
// and aggregate the order id. It returns the assigned seq.
func Add(ctx context.Context, tx Execer, source string, m Message) (int64, error) {
	agg := m.Payload.OrderID
	var seq int64
	if err := tx.QueryRow(ctx, `INSERT INTO outbox_seq (aggregate_id, last_seq) VALUES ($1, 1)
		ON CONFLICT (aggregate_id) DO UPDATE SET last_seq = outbox_seq.last_seq + 1
		RETURNING last_seq`, agg).Scan(&seq); err != nil {
		return 0, fmt.Errorf("outbox: next seq for %s: %w", agg, err)
	}
	body, err := json.Marshal(m.Payload)
	if err != nil {
		return 0, fmt.Errorf("outbox: marshal %s: %w", m.Type, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_id, seq, type, topic, source, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		msg.NewID("ev-"), agg, seq, m.Type, m.Topic, source, body); err != nil {
		return 0, fmt.Errorf("outbox: insert %s for %s: %w", m.Type, agg, err)
	}
	return seq, nil
}
