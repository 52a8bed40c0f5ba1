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
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
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
	eventID := msg.NewID("ev-")
	published := false
	if Direct != nil && (mutant.Is(mutant.PublishBeforeCommit) || mutant.Is(mutant.DualWrite)) {
		published = true // planted bugs: the relay never sees these rows
		rec := Record(eventID, agg, seq, m.Type, m.Topic, source, body)
		if mutant.Is(mutant.PublishBeforeCommit) {
			if err := Direct.ProduceSync(ctx, rec).FirstErr(); err != nil {
				return 0, fmt.Errorf("outbox (publish-before-commit): %w", err)
			}
		} else {
			go publishAfterCommit(eventID, rec)
		}
	}
	if mutant.Is(mutant.CoalescingOutbox) {
		// Planted bug: one pending message per aggregate, the latest wins
		// (an outbox keyed by aggregate, as a state-sync outbox is): an
		// unpublished message is replaced before the relay saw it.
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE aggregate_id = $1 AND published_at IS NULL`, agg); err != nil {
			return 0, fmt.Errorf("outbox (coalescing-outbox): %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_id, seq, type, topic, source, payload, published_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8 THEN now() END)`,
		eventID, agg, seq, m.Type, m.Topic, source, body, published); err != nil {
		return 0, fmt.Errorf("outbox: insert %s for %s: %w", m.Type, agg, err)
	}
	return seq, nil
}

// Record builds the Kafka record of an outbox row: key = aggregate id and
// the envelope headers of models.
func Record(eventID, agg string, seq int64, typ, topic, source string, payload []byte) *kgo.Record {
	key := []byte(agg)
	if mutant.Is(mutant.OutOfOrderCompensation) && typ == msg.ReleaseStock {
		// Planted bug (with the missing tombstone in inventory): a
		// compensation is urgent, so it gets its own key and is not queued
		// behind the order's forward commands; it can overtake them.
		key = []byte(eventID)
	}
	return &kgo.Record{Topic: topic, Key: key, Value: payload, Headers: []kgo.RecordHeader{
		{Key: models.HeaderEventID, Value: []byte(eventID)},
		{Key: models.HeaderAggregateID, Value: []byte(agg)},
		{Key: models.HeaderSeq, Value: []byte(strconv.FormatInt(seq, 10))},
		{Key: models.HeaderType, Value: []byte(typ)},
		{Key: models.HeaderSource, Value: []byte(source)},
	}}
}

// Direct and DirectPool are set only when a dual-write or
// publish-before-commit mutant is on: the service then publishes itself,
// bypassing the relay.
var (
	Direct     *kgo.Client
	DirectPool *pgxpool.Pool
)

// publishAfterCommit is the dual-write mutant: wait until the business
// transaction is visible (committed), then publish. A crash in between
// loses the message; a rolled-back transaction publishes nothing.
func publishAfterCommit(eventID string, rec *kgo.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var one int
		err := DirectPool.QueryRow(ctx, `SELECT 1 FROM outbox WHERE event_id = $1`, eventID).Scan(&one)
		if err == nil {
			Direct.ProduceSync(ctx, rec)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
