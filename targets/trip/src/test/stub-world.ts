// A test double of the harness's world providers (CONTRACTS.md, "World
// providers and the workload API as data"), for testing the trip target
// before the harness can start it: airline, hotel chain, payments and
// mailer, each with actions POST /<provider>/<action>, real-provider
// idempotency (same key + same body → the stored answer; another body →
// 409 idempotency_key_reused; in progress → 409 idempotency_in_progress),
// and outcomes chosen by a request field: a value containing "decline" is
// declined (402), "ambiguous_500" applies the effect and answers 500 to the
// first request of its key, "ambiguous_hang" applies it and never answers.
// Every call that acted is recorded as an effect, in the order applied (the
// stub's clock, like the harness's recorder).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';

export interface Effect {
  i: number;
  provider: string;
  action: string;
  trip: string;
  key: string;
  status: 'succeeded' | 'declined';
  replay: boolean;
  body: Record<string, unknown>;
}

interface Entry {
  fingerprint: string;
  done: boolean;
  status: number;
  answer: string;
  effect: Effect;
}

/** Which request field chooses each provider's outcome. */
const outcomeField: Record<string, string | undefined> = { airline: 'outcome', hotel: 'outcome', payments: 'card', mailer: undefined };
const actions: Record<string, string[]> = { airline: ['book', 'cancel'], hotel: ['book', 'cancel'], payments: ['charges', 'refunds'], mailer: ['emails'] };

export interface StubOptions {
  /** Injected ambiguity (the nemesis's): probability that a new keyed request is answered 500 after acting. */
  ambiguousRate?: number;
  /** Seeded randomness for ambiguousRate. */
  random?: () => number;
}

export class StubWorld {
  readonly effects: Effect[] = [];
  private readonly keys = new Map<string, Entry>();
  private readonly held = new Set<ServerResponse>();
  private server: Server | undefined;
  private port = 0;

  constructor(private readonly opts: StubOptions = {}) {}

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.serve(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const a = this.server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
  }

  url(provider: string): string {
    return `http://127.0.0.1:${this.port}/${provider}`;
  }

  async close(): Promise<void> {
    for (const r of this.held) r.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private serve(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const [, provider = '', action = ''] = (req.url ?? '').split('/');
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(typeof body === 'string' ? body : JSON.stringify(body));
      };
      if (req.method !== 'POST' || !(actions[provider] ?? []).includes(action)) return send(404, { code: 'not_found', error: 'no such action' });
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      } catch {
        return send(400, { code: 'bad_request', error: 'body is not JSON' });
      }
      const trip = typeof body.trip_id === 'string' ? body.trip_id : '';
      const key = String(req.headers['idempotency-key'] ?? '');
      const fingerprint = `${action} ${JSON.stringify(body, Object.keys(body).sort())}`;
      if (key !== '') {
        const prev = this.keys.get(`${provider}|${key}`);
        if (prev !== undefined) {
          if (prev.fingerprint !== fingerprint) return send(409, { code: 'idempotency_key_reused', error: 'key used with another request' });
          if (!prev.done) return send(409, { code: 'idempotency_in_progress', error: 'retry later' });
          this.effects.push({ ...prev.effect, i: this.effects.length, replay: true });
          res.setHeader('Idempotent-Replayed', 'true');
          return send(prev.status, prev.answer);
        }
      }
      const field = outcomeField[provider];
      const outcome = field !== undefined && typeof body[field] === 'string' ? (body[field] as string) : '';
      const declined = outcome.includes('decline');
      const id = `${provider.slice(0, 2)}_${randomUUID().slice(0, 8)}`;
      const status = declined ? 402 : 200;
      const answer = JSON.stringify(declined ? { id, status: 'declined', code: 'declined' } : { id, status: 'succeeded' });
      const effect: Effect = { i: this.effects.length, provider, action, trip, key, status: declined ? 'declined' : 'succeeded', replay: false, body };
      this.effects.push(effect);
      if (key !== '') this.keys.set(`${provider}|${key}`, { fingerprint, done: true, status, answer, effect });
      const injected = key !== '' && (this.opts.ambiguousRate ?? 0) > 0 && (this.opts.random ?? Math.random)() < this.opts.ambiguousRate!;
      if (outcome.includes('ambiguous_hang')) {
        this.held.add(res);
        res.on('close', () => this.held.delete(res));
        return; // applied; never answered
      }
      if (outcome.includes('ambiguous_500') || injected) return send(500, { code: 'internal', error: 'ambiguous: the effect was applied' });
      send(status, answer);
    });
  }
}
