// The payments service: the pivot. It charges the card once the hotel is
// booked, and it is where an aborting trip meets the point of no return:
// trips's step deadline sends TripTimedOut, and payments decides under the
// charge's row lock whether the charge happened.
//
//   (no row) ──HotelBooked──► CHARGING ──charged──► CHARGED   (forward only)
//                                 └────declined──► DECLINED  (hotels, then flights, unwind)
//   (no row) ──TripTimedOut──► TOMBSTONE: PaymentCancelled; a late HotelBooked
//                              is answered PaymentCancelled again, never charged
//   CHARGING ──TripTimedOut──► the charge's answer decides: a success still
//                              wins (the pivot is never compensated)

import type { Pool } from 'pg';
import type { Tx } from '../db';
import { Ev, Topic, type EventType, type Payload } from '../events';
import { failpoint } from '../failpoints';
import type { Logger } from '../log';
import { isMutant } from '../mutants';
import { addToOutbox } from '../outbox';
import { applyOnce, type Envelope } from '../consumer';
import { Provider, str } from '../world';
import { retryDelayMs, type WorkerConfig } from '../worker';

export const paymentsSchema = `
CREATE TABLE IF NOT EXISTS charges (
  trip_id         text PRIMARY KEY,
  state           text NOT NULL,     -- CHARGING, CHARGED, DECLINED, TOMBSTONE (REFUNDING, REFUNDED: planted bug only)
  charge_id       text,
  amount          bigint NOT NULL,
  payload         jsonb NOT NULL,
  abort_requested boolean NOT NULL DEFAULT false,
  attempts        int NOT NULL DEFAULT 0,
  next_at         timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS charges_due ON charges (next_at) WHERE state IN ('CHARGING', 'REFUNDING');
`;

interface Row {
  trip_id: string;
  state: string;
  charge_id: string | null;
  amount: string;
  payload: Payload;
  abort_requested: boolean;
  attempts: number;
}

export class PaymentsService {
  static readonly types = new Set<string>([Ev.HotelBooked, Ev.TripTimedOut]);

  constructor(
    private readonly pool: Pool,
    private readonly provider: Provider,
    private readonly log: Logger,
  ) {}

  private emit(tx: Tx, type: EventType, p: Payload): Promise<number> {
    return addToOutbox(tx, 'payments', { topic: Topic.payments, type, payload: p });
  }

  async handle(e: Envelope): Promise<void> {
    await applyOnce(this.pool, 'payments', e, 'payments.after-apply', async (tx) => {
      const row = (await tx.query<Row>('SELECT * FROM charges WHERE trip_id = $1 FOR UPDATE', [e.aggregateId])).rows[0];
      if (e.type === Ev.HotelBooked) {
        if (row === undefined) {
          await tx.query(`INSERT INTO charges (trip_id, state, amount, payload) VALUES ($1, 'CHARGING', $2, $3)`, [
            e.aggregateId,
            e.payload.total,
            JSON.stringify(e.payload),
          ]);
        } else if (row.state === 'TOMBSTONE') {
          // The trip timed out before its hotel was booked, and we refused
          // the charge: say so again, so the hotel booked meanwhile is cancelled.
          await this.emit(tx, Ev.PaymentCancelled, { ...e.payload, reason: 'trip timed out' });
        }
        return;
      }
      // TripTimedOut
      if (row === undefined) {
        await tx.query(`INSERT INTO charges (trip_id, state, amount, payload) VALUES ($1, 'TOMBSTONE', 0, $2)`, [e.aggregateId, JSON.stringify(e.payload)]);
        await this.emit(tx, Ev.PaymentCancelled, { ...e.payload, reason: 'trip timed out', nothing_booked: true });
      } else if (row.state === 'CHARGING') {
        await tx.query('UPDATE charges SET abort_requested = true, updated_at = now() WHERE trip_id = $1', [e.aggregateId]);
      } else if (row.state === 'CHARGED' && isMutant('refund-after-pivot')) {
        await tx.query(`UPDATE charges SET state = 'REFUNDING', attempts = 0, next_at = now(), updated_at = now() WHERE trip_id = $1`, [e.aggregateId]);
      } else {
        this.log.info('timeout after the charge was decided, ignored', { trip: e.aggregateId, state: row.state });
      }
    });
  }

  worker(signal: AbortSignal, concurrency: number): WorkerConfig {
    return {
      name: 'payments worker',
      pool: this.pool,
      dueSQL: `SELECT trip_id AS id FROM charges WHERE state IN ('CHARGING', 'REFUNDING') AND next_at <= now() ORDER BY next_at LIMIT $1`,
      step: (tx, id) => this.work(tx, id),
      afterCommit: () => failpoint('payments.after-result'),
      concurrency,
      idleMs: 20,
      log: this.log,
      signal,
    };
  }

  private async work(tx: Tx, trip: string): Promise<boolean> {
    const row = (
      await tx.query<Row>(`SELECT * FROM charges WHERE trip_id = $1 AND state IN ('CHARGING', 'REFUNDING') AND next_at <= now() FOR UPDATE SKIP LOCKED`, [trip])
    ).rows[0];
    if (row === undefined) return false;
    const p = row.payload;
    let out;
    try {
      if (row.state === 'REFUNDING') {
        out = await this.provider.call('/refunds', `refund:${trip}`, { trip_id: trip, charge_id: row.charge_id, amount: Number(row.amount) }, row.attempts);
      } else {
        // The charge's key is the trip's: a retry after an ambiguous answer
        // is settled by the provider, never charged twice.
        const key = isMutant('no-provider-key') ? '' : `charge:${trip}`;
        out = await this.provider.call('/charges', key, { trip_id: trip, amount: Number(row.amount), card: p.card }, row.attempts);
      }
    } catch (e) {
      this.log.info('payments: provider call ambiguous, will retry with the same key', { trip, attempt: row.attempts + 1, why: e instanceof Error ? e.message : String(e) });
      await tx.query(`UPDATE charges SET attempts = attempts + 1, next_at = now() + $2::int * interval '1 millisecond', updated_at = now() WHERE trip_id = $1`, [
        trip,
        retryDelayMs(row.attempts),
      ]);
      return true;
    }
    if (row.state === 'REFUNDING') {
      await tx.query(`UPDATE charges SET state = 'REFUNDED', updated_at = now() WHERE trip_id = $1`, [trip]);
      await this.emit(tx, Ev.PaymentCancelled, { ...p, charge_id: row.charge_id ?? undefined, reason: 'refunded after a late timeout' });
      return true;
    }
    await failpoint('payments.after-charge');
    if (out.kind === 'ok') {
      const chargeId = str(out.body, 'id');
      if (row.abort_requested) this.log.info('charge succeeded after the trip timed out: the pivot wins, the trip goes forward', { trip });
      await tx.query(`UPDATE charges SET state = 'CHARGED', charge_id = $2, updated_at = now() WHERE trip_id = $1`, [trip, chargeId]);
      await this.emit(tx, Ev.PaymentCharged, { ...p, charge_id: chargeId });
    } else {
      await tx.query(`UPDATE charges SET state = 'DECLINED', charge_id = NULLIF($2, ''), updated_at = now() WHERE trip_id = $1`, [trip, str(out.body, 'id')]);
      await this.emit(tx, Ev.PaymentDeclined, { ...p, reason: str(out.body, 'code') || `status ${out.status}` });
    }
    return true;
  }
}
