// The transactional outbox and the inbox of one service database.
//
// A service calls addToOutbox inside the same transaction as its business
// change, so the event exists if and only if the change committed (no dual
// write). The per-trip sequence number comes from an upserted counter row in
// outbox_seq; that row stays locked until the transaction ends, so a second
// transaction for the same trip waits, and one trip's rows commit in seq
// order. The id column is a bigserial taken after the counter lock, so within
// one trip ids grow with seq too; across trips ids have gaps and commit out of
// order (nextval is never rolled back), which is why the relay never relies
// on them being contiguous.

import { randomUUID } from 'node:crypto';
import type { Tx } from './db';
import type { EventType, Payload } from './events';
import { Header } from './events';

export const outboxSchema = `
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
`;

/**
 * The observer's outbox snapshot (docs/target-contract.md). published means
 * the broker acknowledged the row: the relay sets published_at only after
 * the ack, in the same transaction that held the row lock.
 */
export const observeOutboxSQL =
  'SELECT id, event_id, aggregate_id, seq, type, topic, published_at IS NOT NULL AS published FROM outbox ORDER BY id';

/** The observer's applied-messages snapshot: one row per event a consumer applied. */
export const observeAppliedSQL =
  'SELECT consumer, event_id, aggregate_id, source, type, seq, position FROM inbox ORDER BY position';

export interface OutboxMessage {
  topic: string;
  type: EventType;
  payload: Payload;
}

/** Writes m into the outbox inside tx; source is the writing service. Returns the seq. */
export async function addToOutbox(tx: Tx, source: string, m: OutboxMessage): Promise<number> {
  const agg = m.payload.trip_id;
  const r = await tx.query<{ last_seq: string }>(
    `INSERT INTO outbox_seq (aggregate_id, last_seq) VALUES ($1, 1)
     ON CONFLICT (aggregate_id) DO UPDATE SET last_seq = outbox_seq.last_seq + 1
     RETURNING last_seq`,
    [agg],
  );
  const seq = Number(r.rows[0]!.last_seq);
  await tx.query(
    `INSERT INTO outbox (event_id, aggregate_id, seq, type, topic, source, payload)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [`ev-${randomUUID()}`, agg, seq, m.type, m.topic, source, JSON.stringify(m.payload)],
  );
  return seq;
}

/** An outbox row as the relay reads it. */
export interface OutboxRow {
  id: string;
  event_id: string;
  aggregate_id: string;
  seq: string;
  type: string;
  topic: string;
  source: string;
  payload: string;
}

/** The Kafka message of an outbox row: key = trip id, the envelope in headers. */
export function recordOf(r: OutboxRow): { key: string; value: string; headers: Record<string, string> } {
  return {
    key: r.aggregate_id,
    value: r.payload,
    headers: {
      [Header.eventId]: r.event_id,
      [Header.aggregateId]: r.aggregate_id,
      [Header.seq]: String(r.seq),
      [Header.type]: r.type,
      [Header.source]: r.source,
    },
  };
}
