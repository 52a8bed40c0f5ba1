// PostgreSQL access: a pool tuned to notice a cut link or a restarted server
// within seconds, one helper for local transactions, and schema migration
// under an advisory lock.

import { Pool, type PoolClient, type PoolConfig } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './log';
import { errMsg } from './log';

export type Tx = PoolClient;

export function newPool(url: string, max: number, log: Logger): Pool {
  const cfg: PoolConfig = {
    connectionString: url,
    max,
    // A blackholed link must fail a connect or a query, not hang it: every
    // caller retries, so a bounded failure is always better than a wait.
    connectionTimeoutMillis: 3000,
    query_timeout: 10_000,
    statement_timeout: 10_000,
    // A transaction held open by a process that vanished behind a proxy
    // (the socket never closes) must not keep its row locks forever.
    idle_in_transaction_session_timeout: 15_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: process.env.SAGACHAOS_INSTANCE ?? 'trip',
  };
  const pool = new Pool(cfg);
  // An idle client whose server went away emits 'error' on the pool; without
  // a listener Node would crash the process. The pool drops the client.
  pool.on('error', (e) => log.warn('idle database connection failed', { err: errMsg(e) }));
  return pool;
}

/**
 * Runs fn inside one local transaction: COMMIT if it resolves, ROLLBACK if it
 * throws. A client whose connection broke is destroyed rather than returned.
 */
export async function withTx<T>(pool: Pool, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client's connection can fail between queries (the server
  // ended it: idle_in_transaction_session_timeout, a restart). pg emits
  // that as 'error' on the client, and an 'error' nobody listens to kills
  // the process; here it only marks the client broken.
  const onError = (e: Error) => {
    broken = e;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (e) {
    try {
      await client.query('ROLLBACK');
    } catch (re) {
      broken = re instanceof Error ? re : new Error(String(re));
    }
    throw e;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/** Applies schema under an advisory lock, retrying while the database is unreachable. */
export async function migrate(pool: Pool, schema: string, log: Logger): Promise<void> {
  let last: unknown;
  for (let attempt = 0; attempt < 100; attempt++) {
    let client: PoolClient | undefined;
    const onError = (e: Error) => log.warn('schema connection failed', { err: errMsg(e) });
    try {
      client = await pool.connect();
      client.on('error', onError);
      await client.query('SELECT pg_advisory_lock(7700418)');
      try {
        await client.query(schema);
      } finally {
        await client.query('SELECT pg_advisory_unlock(7700418)');
      }
      client.off('error', onError);
      client.release();
      return;
    } catch (e) {
      last = e;
      // A session lock we could not release dies with its connection.
      client?.off('error', onError);
      client?.release(e instanceof Error ? e : new Error(String(e)));
      if (attempt % 10 === 0) log.warn('apply schema, will retry', { attempt: attempt + 1, err: errMsg(e) });
      await sleep(100);
    }
  }
  throw new Error(`apply schema: ${errMsg(last)}`);
}
