// The relay: publishes outbox rows to Kafka. Any number of relay processes
// compete, each polling every service database. One poll is one local
// transaction:
//
//  1. Find the trips with unpublished rows, oldest first.
//  2. Try a transaction-scoped advisory lock on each (pg_try_advisory_xact_lock,
//     never waiting): SKIP LOCKED at the level of a trip. A trip is owned by
//     at most one relay at a time; the others skip it.
//  3. In a new statement (its snapshot includes everything the previous owner
//     committed), read the owned trips' unpublished rows in id order, FOR UPDATE.
//  4. Produce them with key = trip id (one partition per trip) and wait for
//     the broker's acks (acks = all, idempotent producer, one request in
//     flight, so a retried request cannot overtake a later one).
//  5. Mark the acknowledged rows published and commit. A crash between 4 and
//     5 republishes them: duplicates are legal (consumers dedupe by
//     event_id); loss and reordering are not.
//
// Why not one "SELECT … FOR UPDATE SKIP LOCKED" over rows: a second relay
// would skip seq k (locked by the first) and take seq k+1, and could publish
// it first. Why each trip's lock is tried once, in its own statement, before
// any row is read: a lock tried row by row inside the row scan can be refused
// for rows k…k+6 and granted at k+7 once the owner committed, skipping ahead
// (the reference relay's TestCompetingRelaysKeepPerAggregateOrder caught that
// shape; this relay keeps the fix).

import type { Pool } from 'pg';
import type { Kafka, Producer, Message } from 'kafkajs';
import { setTimeout as sleep } from 'node:timers/promises';
import { withTx, type Tx } from './db';
import { failpoint } from './failpoints';
import { isMutant } from './mutants';
import { recordOf, type OutboxRow } from './outbox';
import { errMsg, type Logger } from './log';
import { backoff } from './retry';

export interface RelaySource {
  name: string;
  pool: Pool;
}

export interface RelayConfig {
  sources: RelaySource[];
  kafka: Kafka;
  batch: number;
  idleMs: number;
  retentionMs: number;
  cleanupEveryMs: number;
  log: Logger;
  signal: AbortSignal;
}

/** Parses RELAY_DATABASES ("trips=URL flights=URL"). */
export function parseDatabases(s: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of s.split(/\s+/).filter((x) => x !== '')) {
    const eq = f.indexOf('=');
    if (eq <= 0 || eq === f.length - 1) throw new Error(`RELAY_DATABASES entry ${JSON.stringify(f)}: want name=URL`);
    out.set(f.slice(0, eq), f.slice(eq + 1));
  }
  if (out.size === 0) throw new Error('RELAY_DATABASES is empty');
  return out;
}

const candidatesSQL = `SELECT aggregate_id FROM outbox WHERE published_at IS NULL
GROUP BY aggregate_id ORDER BY min(id) LIMIT $1`;

const lockSQL = `SELECT a FROM unnest($1::text[]) AS a
WHERE pg_try_advisory_xact_lock(hashtextextended('outbox:' || a, 0))`;

// Plain FOR UPDATE, not SKIP LOCKED: nobody else may hold these rows, and
// skipping one would leave a hole in a trip's sequence.
const rowsSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, source, payload::text AS payload
FROM outbox WHERE published_at IS NULL AND aggregate_id = ANY($1::text[])
ORDER BY id LIMIT $2 FOR UPDATE`;

// The unordered-relay planted bug: rows spread over relays by SKIP LOCKED alone.
const rowsNoTripLockSQL = `SELECT id, event_id, aggregate_id, seq, type, topic, source, payload::text AS payload
FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`;

/** A producer that is rebuilt after a failed send (kafkajs's idempotent
 * producer can be left with a sequence the broker refuses). */
class RelayProducer {
  private producer: Producer | undefined;
  constructor(private readonly kafka: Kafka) {}

  async send(rows: OutboxRow[]): Promise<void> {
    if (this.producer === undefined) {
      const p = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      await p.connect();
      this.producer = p;
    }
    const byTopic = new Map<string, Message[]>();
    for (const r of rows) {
      const rec = recordOf(r);
      const msgs = byTopic.get(r.topic) ?? [];
      msgs.push(rec);
      byTopic.set(r.topic, msgs);
    }
    try {
      await this.producer.sendBatch({
        acks: -1,
        timeout: 5000,
        topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
      });
    } catch (e) {
      const p = this.producer;
      this.producer = undefined;
      await p.disconnect().catch(() => undefined);
      throw e;
    }
  }

  async close(): Promise<void> {
    await this.producer?.disconnect().catch(() => undefined);
  }
}



/** Locks and returns the next batch inside tx (see the package comment). */
async function selectBatch(tx: Tx, batch: number): Promise<OutboxRow[]> {
  if (isMutant('unordered-relay')) return (await tx.query<OutboxRow>(rowsNoTripLockSQL, [batch])).rows;
  const cands = (await tx.query<{ aggregate_id: string }>(candidatesSQL, [batch])).rows.map((r) => r.aggregate_id);
  if (cands.length === 0) return [];
  const owned = (await tx.query<{ a: string }>(lockSQL, [cands])).rows.map((r) => r.a);
  if (owned.length === 0) return [];
  return (await tx.query<OutboxRow>(rowsSQL, [owned, batch])).rows;
}

const markSQL = 'UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])';

export interface Sender {
  send(rows: OutboxRow[]): Promise<void>;
}

/** Publishes one batch from src; returns how many rows it marked. */
export async function pollOnce(src: RelaySource, producer: Sender, batch: number, log: Logger): Promise<number> {
  if (isMutant('mark-before-ack')) {
    // Planted bug: commit the mark first, then produce; a crash or a failed
    // produce in between loses the rows.
    const rows = await withTx(src.pool, async (tx) => {
      const rs = await selectBatch(tx, batch);
      if (rs.length > 0) await tx.query(markSQL, [rs.map((r) => r.id)]);
      return rs;
    });
    if (rows.length === 0) return 0;
    await failpoint('relay.after-publish');
    await producer.send(rows);
    await failpoint('relay.after-mark');
    return rows.length;
  }
  const n = await withTx(src.pool, async (tx) => {
    const rows = await selectBatch(tx, batch);
    if (rows.length === 0) return 0;
    await failpoint('relay.after-select');
    // Rows are in id order, and within one trip ids grow with seq (see
    // outbox.ts), so each trip's rows are already in seq order.
    log.debug('relay batch', { db: src.name, rows: rows.map((r) => `${r.aggregate_id}:${r.seq}`).join(' ') });
    await producer.send(rows);
    await failpoint('relay.after-publish');
    await tx.query(markSQL, [rows.map((r) => r.id)]);
    return rows.length;
  });
  if (n > 0) await failpoint('relay.after-mark');
  return n;
}

/** Deletes published rows older than the retention; never an unpublished one. */
export async function cleanup(pool: Pool, retentionMs: number): Promise<void> {
  await failpoint('relay.before-cleanup');
  await pool.query(`DELETE FROM outbox WHERE published_at IS NOT NULL AND published_at < now() - $1::bigint * interval '1 millisecond'`, [retentionMs]);
}

/** Drains every source until the signal aborts. */
export async function runRelay(cfg: RelayConfig): Promise<void> {
  const producer = new RelayProducer(cfg.kafka);
  await Promise.all(
    cfg.sources.map(async (src) => {
      // The first cleanup waits one interval: a (re)started relay publishes
      // before it deletes anything.
      let lastClean = Date.now();
      for (let n = 0; !cfg.signal.aborted; ) {
        let moved = 0;
        try {
          moved = await pollOnce(src, producer, cfg.batch, cfg.log);
          n = 0;
        } catch (e) {
          if (!cfg.signal.aborted) cfg.log.warn('relay poll', { db: src.name, err: errMsg(e) });
          await backoff(n++, cfg.signal);
          continue;
        }
        if (Date.now() - lastClean >= cfg.cleanupEveryMs) {
          await cleanup(src.pool, cfg.retentionMs).catch((e) => cfg.log.warn('outbox cleanup', { db: src.name, err: errMsg(e) }));
          lastClean = Date.now();
        }
        if (moved === 0) await sleep(cfg.idleMs, undefined, { signal: cfg.signal }).catch(() => undefined);
      }
    }),
  );
  await producer.close();
}
