// Calls to the third-party providers (airline, hotel chain, payments,
// mailer), the way a careful client calls a real provider: every call
// carries an Idempotency-Key derived from the trip and the step, each
// request has its own timeout, and an ambiguous outcome (timeout, connection
// error, 5xx, 409 "in progress") is never read as success or failure: the
// caller asks again later with the same key, and the provider settles it.

import { isMutant } from './mutants';

/** A definite answer from a provider. */
export type Outcome =
  | { kind: 'ok'; status: number; body: Record<string, unknown> }
  | { kind: 'declined'; status: number; body: Record<string, unknown> }
  | { kind: 'rejected'; status: number; body: Record<string, unknown> };

/** No definite answer: retry with the same key. */
export class AmbiguousOutcome extends Error {
  override name = 'AmbiguousOutcome';
}

export class Provider {
  readonly base: string;
  constructor(
    base: string,
    private readonly timeoutMs: number,
  ) {
    this.base = base.replace(/\/+$/, '');
  }

  /**
   * POSTs body to path once. Resolves with a definite outcome (2xx; 402
   * declined; another 4xx except 408/409/429, a request the provider will
   * never accept) or throws AmbiguousOutcome. key "" sends no
   * Idempotency-Key (only planted bugs do that). attempt is how many tries
   * of this call were ambiguous before: each doubles the timeout (up to 8×),
   * so a provider that is merely slower than CALL_TIMEOUT is still waited
   * for in the end, instead of being given up on forever.
   */
  async call(path: string, key: string, body: Record<string, unknown>, attempt = 0): Promise<Outcome> {
    const timeoutMs = this.timeoutMs * 2 ** Math.min(attempt, 3);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key !== '') headers['idempotency-key'] = key;
    let res: Response;
    try {
      res = await fetch(this.base + path, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        // The no-step-timeout planted bug waits for an answer forever.
        ...(isMutant('no-step-timeout') ? {} : { signal: AbortSignal.timeout(timeoutMs) }),
      });
    } catch (e) {
      throw new AmbiguousOutcome(`${this.base}${path} (key ${key}): ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`);
    }
    let text = '';
    try {
      text = await res.text();
    } catch (e) {
      throw new AmbiguousOutcome(`${this.base}${path} (key ${key}): reading the answer: ${e instanceof Error ? e.message : String(e)}`);
    }
    let parsed: Record<string, unknown> = {};
    try {
      const v: unknown = JSON.parse(text);
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) parsed = v as Record<string, unknown>;
    } catch {
      // not JSON: keep the status only
    }
    const s = res.status;
    if (s >= 200 && s < 300) return { kind: 'ok', status: s, body: parsed };
    if (s === 402) return { kind: 'declined', status: s, body: parsed };
    if (s >= 400 && s < 500 && s !== 408 && s !== 409 && s !== 429) return { kind: 'rejected', status: s, body: parsed };
    throw new AmbiguousOutcome(`${this.base}${path} (key ${key}): status ${s} ${text.slice(0, 200)}`);
  }
}

export function str(body: Record<string, unknown>, k: string): string {
  const v = body[k];
  return typeof v === 'string' ? v : '';
}
