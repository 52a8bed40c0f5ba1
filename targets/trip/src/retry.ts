import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Sleeps before retry attempt n, or returns early when the signal aborts.
 * The cap is short (250 ms): every retried operation here is cheap and
 * idempotent, and a restored link or restarted database should be used
 * within a fraction of a second.
 */
export async function backoff(n: number, signal?: AbortSignal): Promise<void> {
  const ms = Math.min((n + 1) * 50, 250);
  await sleep(ms, undefined, signal ? { signal } : undefined).catch(() => undefined);
}
