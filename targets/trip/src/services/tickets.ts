// The tickets service: the retriable steps after the pivot. Once the card is
// charged it issues the tickets and e-mails the itinerary, and it retries
// until the mailer accepts (never gives up, never compensates). trips asks
// again (TicketsRequested) when its deadline passes; an already issued trip
// is answered again, not issued twice.

import type { Pool } from 'pg';
import type { Tx } from '../db';
import { Ev, Topic, type Payload } from '../events';
import { failpoint } from '../failpoints';
import type { Logger } from '../log';
import { addToOutbox } from '../outbox';
import { applyOnce, type Envelope } from '../consumer';
import { Provider } from '../world';
import { retryDelayMs, type WorkerConfig } from '../worker';

export const ticketsSchema = `
CREATE TABLE IF NOT EXISTS issues (
  trip_id    text PRIMARY KEY,
  state      text NOT NULL,      -- ISSUING, ISSUED
  tickets    jsonb NOT NULL,
  payload    jsonb NOT NULL,
  attempts   int NOT NULL DEFAULT 0,
  next_at    timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS issues_due ON issues (next_at) WHERE state = 'ISSUING';
`;

/** Ticket numbers are a function of the trip, so a re-issue names the same tickets. */
export function ticketNumbers(p: Payload): string[] {
  return [`TK-${p.trip_id}-F-${p.flight}`, `TK-${p.trip_id}-H-${p.hotel}`];
}

interface Row {
  trip_id: string;
  state: string;
  tickets: string[];
  payload: Payload;
  attempts: number;
}

export class TicketsService {
  static readonly types = new Set<string>([Ev.PaymentCharged, Ev.TicketsRequested]);

  constructor(
    private readonly pool: Pool,
    private readonly mailer: Provider,
    private readonly log: Logger,
  ) {}

  async handle(e: Envelope): Promise<void> {
    await applyOnce(this.pool, 'tickets', e, 'tickets.after-apply', async (tx) => {
      const row = (await tx.query<Row>('SELECT * FROM issues WHERE trip_id = $1 FOR UPDATE', [e.aggregateId])).rows[0];
      if (row === undefined) {
        await tx.query(`INSERT INTO issues (trip_id, state, tickets, payload) VALUES ($1, 'ISSUING', $2, $3)`, [
          e.aggregateId,
          JSON.stringify(ticketNumbers(e.payload)),
          JSON.stringify(e.payload),
        ]);
      } else if (row.state === 'ISSUED' && e.type === Ev.TicketsRequested) {
        await addToOutbox(tx, 'tickets', { topic: Topic.tickets, type: Ev.TicketsIssued, payload: row.payload });
      }
    });
  }

  worker(signal: AbortSignal, concurrency: number): WorkerConfig {
    return {
      name: 'tickets worker',
      pool: this.pool,
      dueSQL: `SELECT trip_id AS id FROM issues WHERE state = 'ISSUING' AND next_at <= now() ORDER BY next_at LIMIT $1`,
      step: (tx, id) => this.work(tx, id),
      afterCommit: () => failpoint('tickets.after-result'),
      concurrency,
      idleMs: 20,
      log: this.log,
      signal,
    };
  }

  private async work(tx: Tx, trip: string): Promise<boolean> {
    const row = (await tx.query<Row>(`SELECT * FROM issues WHERE trip_id = $1 AND state = 'ISSUING' AND next_at <= now() FOR UPDATE SKIP LOCKED`, [trip])).rows[0];
    if (row === undefined) return false;
    const retryLater = async (why: string) => {
      this.log.info('tickets: itinerary e-mail not accepted yet, will retry with the same key', { trip, attempt: row.attempts + 1, why });
      await tx.query(`UPDATE issues SET attempts = attempts + 1, next_at = now() + $2::int * interval '1 millisecond', updated_at = now() WHERE trip_id = $1`, [
        trip,
        retryDelayMs(row.attempts),
      ]);
    };
    let out;
    try {
      out = await this.mailer.call('/emails', `itinerary:${trip}`, { trip_id: trip, kind: 'itinerary', to: row.payload.customer, tickets: row.tickets }, row.attempts);
    } catch (e) {
      await retryLater(e instanceof Error ? e.message : String(e));
      return true;
    }
    await failpoint('tickets.after-email');
    if (out.kind !== 'ok') {
      // Retriable: after the pivot a refusal is a problem to fix, not a reason to undo the trip.
      this.log.error('mailer refused the itinerary e-mail; retrying', { trip, status: out.status, body: out.body });
      await retryLater(`refused with ${out.status}`);
      return true;
    }
    await tx.query(`UPDATE issues SET state = 'ISSUED', updated_at = now() WHERE trip_id = $1`, [trip]);
    await addToOutbox(tx, 'tickets', { topic: Topic.tickets, type: Ev.TicketsIssued, payload: row.payload });
    return true;
  }
}
