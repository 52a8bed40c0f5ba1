// An idempotent Kafka consumer for one service.
//
// Each applied message is one local transaction that also inserts its inbox
// row (claim) and any outgoing outbox rows; a redelivered message finds its
// inbox row and has no second effect. Offsets are committed only after the
// message's transaction committed (autoCommit off), so a crash anywhere
// before that redelivers, never loses. One partition's records are handled
// in order; partitions are handled concurrently.
//
// kafkajs × kfake: kafkajs has no static membership (KIP-345: it never sets
// group.instance.id), and kfake arms a member's session timer only when it
// could hand the member its JoinGroup answer. A process SIGKILLed while its
// JoinGroup waited can therefore stay in the group as a corpse that holds
// partitions forever once the leader synced (about every second such kill;
// see README.md, "kafkajs against kfake"). Each incarnation uses its
// instance name as client id, so any other member with our client id is a
// predecessor's corpse; the reaper then leaves and rejoins, and the broker
// drops the corpse at the end of that rebalance (it cannot rejoin).

import type { Consumer, Kafka, KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { withTx, type Tx } from './db';
import { Header, type Payload } from './events';
import { failpoint } from './failpoints';
import { errMsg, type Logger } from './log';
import { backoff } from './retry';

/** One received message: its envelope headers and decoded value. */
export interface Envelope {
  eventId: string;
  aggregateId: string;
  seq: number;
  type: string;
  source: string;
  payload: Payload;
  topic: string;
  partition: number;
  offset: string;
}

/** Applies one message; throws to have it retried. Must claim it in the inbox. */
export type Handler = (e: Envelope) => Promise<void>;

export interface ConsumerConfig {
  kafka: Kafka;
  /** The consumer name (inbox consumer column) and group id. */
  group: string;
  /** The Kafka client id: the instance name, so the reaper can tell corpses. */
  clientId: string;
  topics: string[];
  /** Types this consumer applies; others are skipped without an inbox row. */
  types: ReadonlySet<string>;
  handler: Handler;
  /** Failpoint name for "applied and committed, offset not committed". */
  afterCommitFailpoint: string;
  log: Logger;
  signal: AbortSignal;
  sessionTimeoutMs?: number;
  onJoined?: () => void;
}

export class MalformedMessage extends Error {
  override name = 'MalformedMessage';
}

export function decode(topic: string, partition: number, m: KafkaMessage): Envelope {
  const h = (k: string): string => {
    const v = m.headers?.[k];
    if (v === undefined) return '';
    return Buffer.isBuffer(v) ? v.toString() : Array.isArray(v) ? String(v[0] ?? '') : String(v);
  };
  const e = {
    eventId: h(Header.eventId),
    aggregateId: h(Header.aggregateId),
    seq: Number(h(Header.seq) || '0'),
    type: h(Header.type),
    source: h(Header.source),
    topic,
    partition,
    offset: m.offset,
  };
  if (e.eventId === '' || e.aggregateId === '' || e.type === '' || !Number.isInteger(e.seq)) {
    throw new MalformedMessage(`missing envelope headers (event_id=${e.eventId} aggregate_id=${e.aggregateId} type=${e.type} seq=${h(Header.seq)})`);
  }
  let payload: Payload;
  try {
    payload = JSON.parse(m.value?.toString() ?? '') as Payload;
  } catch (err) {
    throw new MalformedMessage(`value is not JSON: ${errMsg(err)}`);
  }
  return { ...e, payload };
}

/**
 * Inserts the inbox row for e inside tx. Returns false when the message was
 * already applied: the caller must then apply nothing.
 */
export async function claim(tx: Tx, consumer: string, e: Envelope): Promise<boolean> {
  const r = await tx.query(
    `INSERT INTO inbox (consumer, event_id, aggregate_id, source, type, seq)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, event_id) DO NOTHING`,
    [consumer, e.eventId, e.aggregateId, e.source, e.type, e.seq],
  );
  return r.rowCount === 1;
}

/** Consumes until the signal aborts, recreating the kafkajs consumer when it gives up. */
export async function runConsumer(cfg: ConsumerConfig): Promise<void> {
  for (let n = 0; !cfg.signal.aborted; n++) {
    const reason = await runIncarnation(cfg).catch((e) => `error: ${errMsg(e)}`);
    if (cfg.signal.aborted) break;
    cfg.log.warn('consumer restarts', { group: cfg.group, reason });
    await backoff(Math.min(n, 4), cfg.signal);
  }
}

/** One kafkajs consumer's life; resolves with why it ended. */
async function runIncarnation(cfg: ConsumerConfig): Promise<string> {
  // kafkajs heartbeats only from its fetch loop (between batches and when a
  // handler calls heartbeat()), so a loaded machine needs slack here; it is
  // also how long a restarted incarnation waits for its corpse's session.
  const session = cfg.sessionTimeoutMs ?? 3000;
  const consumer: Consumer = cfg.kafka.consumer({
    groupId: cfg.group,
    sessionTimeout: session,
    // Also how long the broker waits, in a rebalance, for a member that will
    // never rejoin (a corpse): keep it short.
    rebalanceTimeout: 5000,
    heartbeatInterval: Math.max(100, Math.floor(session / 10)),
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 10, restartOnFailure: async () => true },
  });
  let memberId = '';
  let ended: (why: string) => void = () => {};
  const end = new Promise<string>((resolve) => (ended = resolve));
  consumer.on(consumer.events.GROUP_JOIN, (ev) => {
    memberId = ev.payload.memberId;
    cfg.log.info('joined group', { group: cfg.group, member: memberId, assigned: ev.payload.memberAssignment });
    cfg.onJoined?.();
  });
  consumer.on(consumer.events.CRASH, (ev) => {
    if (!ev.payload.restart) ended(`crashed: ${errMsg(ev.payload.error)}`);
  });
  const onAbort = () => ended('stopping');
  cfg.signal.addEventListener('abort', onAbort, { once: true });
  const reaper = reapCorpses(cfg, () => memberId, ended);
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: cfg.topics, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        for (const m of batch.messages) {
          if (!isRunning() || isStale()) return;
          const handled = await handleWithRetry(cfg, batch.topic, batch.partition, m, heartbeat, () => isRunning() && !isStale());
          if (!handled) return; // the partition moved on without us; redelivered to its new owner
          resolveOffset(m.offset);
          try {
            await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(m.offset) + 1n).toString() }]);
          } catch (e) {
            // The next owner of the partition redelivers; the inbox makes that harmless.
            cfg.log.warn('commit offset', { topic: batch.topic, partition: batch.partition, offset: m.offset, err: errMsg(e) });
            return;
          }
        }
      },
    });
    return await end;
  } finally {
    cfg.signal.removeEventListener('abort', onAbort);
    reaper.stop();
    await consumer.disconnect().catch((e) => cfg.log.warn('consumer disconnect', { err: errMsg(e) }));
  }
}

/** Handles one record until it is applied (true) or the partition is lost (false). */
async function handleWithRetry(
  cfg: ConsumerConfig,
  topic: string,
  partition: number,
  m: KafkaMessage,
  heartbeat: () => Promise<void>,
  stillOwner: () => boolean,
): Promise<boolean> {
  let e: Envelope;
  try {
    e = decode(topic, partition, m);
  } catch (err) {
    cfg.log.error('skip malformed record', { topic, partition, offset: m.offset, err: errMsg(err) });
    return true;
  }
  if (!cfg.types.has(e.type)) return true;
  for (let n = 0; ; n++) {
    if (cfg.signal.aborted || !stillOwner()) return false;
    try {
      await cfg.handler(e);
      await failpoint(cfg.afterCommitFailpoint);
      return true;
    } catch (err) {
      if (n % 10 === 0) cfg.log.warn('handle message, will retry', { type: e.type, trip: e.aggregateId, event_id: e.eventId, attempt: n + 1, err: errMsg(err) });
      await heartbeat().catch(() => undefined);
      await backoff(n, cfg.signal);
    }
  }
}

/** Watches the group for members with our client id that are not us. */
function reapCorpses(cfg: ConsumerConfig, self: () => string, restart: (why: string) => void): { stop(): void } {
  const ac = new AbortController();
  const admin = cfg.kafka.admin();
  void (async () => {
    let connected = false;
    let seenSince = 0;
    while (!ac.signal.aborted) {
      await sleep(2000, undefined, { signal: ac.signal }).catch(() => undefined);
      if (ac.signal.aborted || self() === '') continue;
      try {
        if (!connected) {
          await admin.connect();
          connected = true;
        }
        const { groups } = await admin.describeGroups([cfg.group]);
        const g = groups[0];
        const corpses = (g?.members ?? []).filter((m) => m.clientId === cfg.clientId && m.memberId !== self());
        if (g?.state !== 'Stable' || corpses.length === 0) {
          seenSince = 0;
          continue;
        }
        // Seen twice in a row in a stable group: not a member that is just
        // leaving, a corpse the broker will not expire.
        if (seenSince === 0) {
          seenSince = Date.now();
          continue;
        }
        restart(`corpse of an earlier incarnation holds partitions: ${corpses.map((c) => c.memberId).join(', ')}`);
        return;
      } catch (e) {
        cfg.log.debug('describe group', { err: errMsg(e) });
      }
    }
  })().finally(() => admin.disconnect().catch(() => undefined));
  return { stop: () => ac.abort() };
}

/** A consumer's handler skeleton: claim, apply, failpoint, commit — in one transaction. */
export async function applyOnce(
  pool: Pool,
  consumer: string,
  e: Envelope,
  beforeCommitFailpoint: string,
  apply: (tx: Tx) => Promise<void>,
  opts: { skipInbox?: boolean } = {},
): Promise<void> {
  await withTx(pool, async (tx) => {
    const fresh = await claim(tx, consumer, e);
    if (!fresh && !opts.skipInbox) return;
    await apply(tx);
    await failpoint(beforeCommitFailpoint);
  });
}
