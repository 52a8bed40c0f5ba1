// A worker loop that drives provider calls from durable state.
//
// Consumers never call a provider: they only record, in the inbox
// transaction, that a step is due (a row in a state such as BOOKING). The
// worker finds due rows, locks each one (FOR UPDATE SKIP LOCKED, so
// competing instances split the work), makes one provider call and records
// the answer and its event in the same transaction. A crash between the
// provider's answer and that commit redoes the call with the same
// Idempotency-Key, and the provider answers as before; an ambiguous answer
// is recorded as an attempt and retried later. Holding the row lock during
// the call (bounded by the per-call timeout) is what lets a compensation
// that arrives meanwhile wait for the booking's outcome instead of racing it.

import type { Pool } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { withTx, type Tx } from './db';
import { errMsg, type Logger } from './log';
import { backoff } from './retry';

export interface WorkerConfig {
  name: string;
  pool: Pool;
  /** SQL selecting up to $1 due keys (column "id"), oldest first. */
  dueSQL: string;
  /** Locks one due row (FOR UPDATE SKIP LOCKED) and does its step; false if it was not due any more. */
  step: (tx: Tx, id: string) => Promise<boolean>;
  /** Runs after a step's transaction committed (failpoints). */
  afterCommit?: () => Promise<void> | undefined;
  concurrency: number;
  idleMs: number;
  log: Logger;
  signal: AbortSignal;
}

export async function runWorker(cfg: WorkerConfig): Promise<void> {
  for (let n = 0; !cfg.signal.aborted; ) {
    let ids: string[];
    try {
      ids = (await cfg.pool.query<{ id: string }>(cfg.dueSQL, [cfg.concurrency * 4])).rows.map((r) => r.id);
      n = 0;
    } catch (e) {
      if (!cfg.signal.aborted) cfg.log.warn(`${cfg.name}: find due work`, { err: errMsg(e) });
      await backoff(n++, cfg.signal);
      continue;
    }
    if (ids.length === 0) {
      await sleep(cfg.idleMs, undefined, { signal: cfg.signal }).catch(() => undefined);
      continue;
    }
    // A small pool of lanes: each takes the next id; one slow provider call
    // does not hold up the others.
    let next = 0;
    const lane = async () => {
      while (!cfg.signal.aborted && next < ids.length) {
        const id = ids[next++]!;
        try {
          const done = await withTx(cfg.pool, (tx) => cfg.step(tx, id));
          if (done) await cfg.afterCommit?.();
        } catch (e) {
          cfg.log.warn(`${cfg.name}: step failed, will retry`, { trip: id, err: errMsg(e) });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(cfg.concurrency, ids.length) }, lane));
  }
}

/** When to try an ambiguous call again: 100 ms doubling to 2 s. */
export function retryDelayMs(attempts: number): number {
  return Math.min(100 * 2 ** Math.min(attempts, 5), 2000);
}
