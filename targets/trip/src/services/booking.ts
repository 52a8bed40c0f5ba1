// A compensatable booking step (flights, hotels): one module, two
// configurations. The service books when the previous step succeeded, and
// cancels when the step after it failed or was cancelled, so compensations
// run in reverse order without anyone directing them.
//
// Per trip there is one row in bookings:
//
//   BOOKING ──book ok──► BOOKED ──compensate──► CANCELLING ──cancel ok──► CANCELLED
//      │  └─book ok, compensation arrived meanwhile─► CANCELLING (no Booked event)
//      └──declined──► FAILED
//   (no row) ──compensate──► TOMBSTONE: nothing was booked; a later request
//                            for the trip is ignored (it arrived late, on
//                            another topic)
//
// A compensation that arrives while the booking call is in flight waits for
// the row lock (the worker holds it during the call), then finds BOOKING and
// sets cancel_requested: the worker cancels whatever the provider answers,
// so a late success after a compensation is compensated, never left hanging.

import type { Pool } from 'pg';
import { randomUUID } from 'node:crypto';
import type { Tx } from '../db';
import { Ev, Topic, type EventType, type Payload } from '../events';
import { failpoint } from '../failpoints';
import type { Logger } from '../log';
import { isMutant } from '../mutants';
import { addToOutbox } from '../outbox';
import { applyOnce, type Envelope } from '../consumer';
import { Provider, str } from '../world';
import { retryDelayMs, type WorkerConfig } from '../worker';

export const bookingSchema = `
CREATE TABLE IF NOT EXISTS bookings (
  trip_id          text NOT NULL,
  booking_ref      text NOT NULL,          -- the provider's Idempotency-Key for the booking
  state            text NOT NULL,          -- BOOKING, BOOKED, FAILED, CANCELLING, CANCELLED, TOMBSTONE
  provider_id      text,                   -- the provider's id of the booking
  payload          jsonb NOT NULL,         -- the itinerary, for the events
  cancel_requested boolean NOT NULL DEFAULT false,
  attempts         int NOT NULL DEFAULT 0,
  next_at          timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (trip_id, booking_ref)
);
CREATE INDEX IF NOT EXISTS bookings_due ON bookings (next_at) WHERE state IN ('BOOKING', 'CANCELLING');
`;

export interface BookingStep {
  service: 'flights' | 'hotels';
  topic: string;
  /** The event that asks for the booking (the previous step's success). */
  trigger: EventType;
  /** Events that undo the booking (the next step failed or was undone). */
  compensateOn: readonly EventType[];
  booked: EventType;
  failed: EventType;
  cancelled: EventType;
  /** Idempotency-Key prefix: flight:<trip>, hotel:<trip>. */
  keyPrefix: string;
  /** Payload field the provider's booking id is copied into. */
  resultField: 'flight_booking' | 'hotel_booking';
  bookBody(p: Payload): Record<string, unknown>;
}

export const flightStep: BookingStep = {
  service: 'flights',
  topic: Topic.flights,
  trigger: Ev.TripRequested,
  compensateOn: [Ev.HotelBookingFailed, Ev.HotelCancelled],
  booked: Ev.FlightBooked,
  failed: Ev.FlightBookingFailed,
  cancelled: Ev.FlightCancelled,
  keyPrefix: 'flight',
  resultField: 'flight_booking',
  bookBody: (p) => ({ trip_id: p.trip_id, flight: p.flight, passenger: p.customer, outcome: p.flight_outcome }),
};

export const hotelStep: BookingStep = {
  service: 'hotels',
  topic: Topic.hotels,
  trigger: Ev.FlightBooked,
  compensateOn: [Ev.PaymentDeclined, Ev.PaymentCancelled],
  booked: Ev.HotelBooked,
  failed: Ev.HotelBookingFailed,
  cancelled: Ev.HotelCancelled,
  keyPrefix: 'hotel',
  resultField: 'hotel_booking',
  bookBody: (p) => ({ trip_id: p.trip_id, hotel: p.hotel, nights: p.nights, guest: p.customer, outcome: p.hotel_outcome }),
};

interface Row {
  trip_id: string;
  booking_ref: string;
  state: string;
  provider_id: string | null;
  payload: Payload;
  cancel_requested: boolean;
  attempts: number;
}

export class BookingService {
  constructor(
    readonly step: BookingStep,
    private readonly pool: Pool,
    private readonly provider: Provider,
    private readonly log: Logger,
  ) {}

  /** The event types this service's consumer applies. */
  types(): Set<string> {
    const t = new Set<string>([this.step.trigger, ...this.step.compensateOn]);
    if (this.step.service === 'flights' && isMutant('double-compensation')) {
      t.add(Ev.PaymentDeclined);
      t.add(Ev.PaymentCancelled);
    }
    return t;
  }

  private emit(tx: Tx, type: EventType, p: Payload): Promise<number> {
    return addToOutbox(tx, this.step.service, { topic: this.step.topic, type, payload: p });
  }

  async handle(e: Envelope): Promise<void> {
    const svc = this.step.service;
    const noInbox = svc === 'flights' && isMutant('no-inbox');
    await applyOnce(this.pool, svc, e, `${svc}.after-apply`, async (tx) => {
      if (e.type === this.step.trigger) return this.onRequest(tx, e, noInbox);
      if (svc === 'flights' && isMutant('double-compensation')) return this.compensateEveryTime(tx, e);
      return this.onCompensate(tx, e);
    }, { skipInbox: noInbox });
  }

  private async onRequest(tx: Tx, e: Envelope, noInbox: boolean): Promise<void> {
    // The booking reference is the trip's, so a second request for the
    // trip (redelivered, or re-sent) finds the row and books nothing. The
    // no-inbox planted bug mints a fresh reference per reaction instead.
    const ref = noInbox ? `${this.step.keyPrefix}:${e.aggregateId}:${randomUUID()}` : `${this.step.keyPrefix}:${e.aggregateId}`;
    const r = await tx.query(
      `INSERT INTO bookings (trip_id, booking_ref, state, payload) VALUES ($1, $2, 'BOOKING', $3)
       ON CONFLICT (trip_id, booking_ref) DO NOTHING`,
      [e.aggregateId, ref, JSON.stringify(e.payload)],
    );
    if (r.rowCount === 0) this.log.info('booking request for a trip already handled (or tombstoned), ignored', { trip: e.aggregateId, type: e.type });
  }

  private async onCompensate(tx: Tx, e: Envelope): Promise<void> {
    const rows = (await tx.query<Row>('SELECT * FROM bookings WHERE trip_id = $1 FOR UPDATE', [e.aggregateId])).rows;
    if (rows.length === 0) {
      // The compensation overtook the request (they travel on different
      // topics): nothing is booked, and nothing may be booked later.
      if (!(this.step.service === 'hotels' && isMutant('cross-topic-order'))) {
        await tx.query(`INSERT INTO bookings (trip_id, booking_ref, state, payload) VALUES ($1, $2, 'TOMBSTONE', $3)`, [
          e.aggregateId,
          `${this.step.keyPrefix}:${e.aggregateId}`,
          JSON.stringify(e.payload),
        ]);
      }
      await this.emit(tx, this.step.cancelled, { ...e.payload, nothing_booked: true });
      return;
    }
    for (const row of rows) {
      switch (row.state) {
        case 'BOOKING':
          await tx.query('UPDATE bookings SET cancel_requested = true, updated_at = now() WHERE trip_id = $1 AND booking_ref = $2', [row.trip_id, row.booking_ref]);
          break;
        case 'BOOKED':
          await tx.query(`UPDATE bookings SET state = 'CANCELLING', next_at = now(), attempts = 0, updated_at = now() WHERE trip_id = $1 AND booking_ref = $2`, [
            row.trip_id,
            row.booking_ref,
          ]);
          break;
        default:
          // FAILED: the trip is aborting already; CANCELLING, CANCELLED,
          // TOMBSTONE: compensated or being compensated.
          break;
      }
    }
  }

  /** The double-compensation planted bug: cancel now, keyed by the event, whatever the state. */
  private async compensateEveryTime(tx: Tx, e: Envelope): Promise<void> {
    const rows = (await tx.query<Row>('SELECT * FROM bookings WHERE trip_id = $1 FOR UPDATE', [e.aggregateId])).rows;
    const row = rows[0];
    if (row === undefined || row.provider_id === null) return this.onCompensate(tx, e);
    const out = await this.provider.call('/cancel', `cancel-${this.step.keyPrefix}:${e.eventId}`, { trip_id: row.trip_id, booking_id: row.provider_id });
    if (out.kind !== 'ok') throw new Error(`cancel refused: ${out.status}`);
    await tx.query(`UPDATE bookings SET state = 'CANCELLED', updated_at = now() WHERE trip_id = $1`, [row.trip_id]);
    await this.emit(tx, this.step.cancelled, row.payload);
  }

  worker(signal: AbortSignal, concurrency: number): WorkerConfig {
    const svc = this.step.service;
    return {
      name: `${svc} worker`,
      pool: this.pool,
      dueSQL: `SELECT trip_id || ' ' || booking_ref AS id FROM bookings WHERE state IN ('BOOKING', 'CANCELLING') AND next_at <= now() ORDER BY next_at LIMIT $1`,
      step: (tx, id) => this.work(tx, id),
      afterCommit: () => failpoint(`${svc}.after-result`),
      concurrency,
      idleMs: 20,
      log: this.log,
      signal,
    };
  }

  private async work(tx: Tx, id: string): Promise<boolean> {
    const sp = id.indexOf(' ');
    const [trip, ref] = [id.slice(0, sp), id.slice(sp + 1)];
    const row = (
      await tx.query<Row>(
        `SELECT * FROM bookings WHERE trip_id = $1 AND booking_ref = $2 AND state IN ('BOOKING', 'CANCELLING') AND next_at <= now() FOR UPDATE SKIP LOCKED`,
        [trip, ref],
      )
    ).rows[0];
    if (row === undefined) return false;
    const svc = this.step.service;
    const set = (sql: string, args: unknown[]) => tx.query(`UPDATE bookings SET ${sql}, updated_at = now() WHERE trip_id = $1 AND booking_ref = $2`, [trip, ref, ...args]);
    const retryLater = (why: string) => {
      this.log.info(`${svc}: provider call ambiguous, will retry with the same key`, { trip, state: row.state, attempt: row.attempts + 1, why });
      return set(`attempts = attempts + 1, next_at = now() + $3::int * interval '1 millisecond'`, [retryDelayMs(row.attempts)]);
    };
    if (row.state === 'BOOKING') {
      let out;
      try {
        out = await this.provider.call('/book', row.booking_ref, this.step.bookBody(row.payload), row.attempts);
      } catch (e) {
        await retryLater(e instanceof Error ? e.message : String(e));
        return true;
      }
      await failpoint(`${svc}.after-book`);
      if (out.kind === 'ok') {
        const providerId = str(out.body, 'id');
        if (row.cancel_requested) {
          // The saga is unwinding: a late success is undone, never announced.
          await set(`state = 'CANCELLING', provider_id = $3, attempts = 0, next_at = now()`, [providerId]);
        } else {
          await set(`state = 'BOOKED', provider_id = $3`, [providerId]);
          await this.emit(tx, this.step.booked, { ...row.payload, [this.step.resultField]: providerId });
        }
      } else {
        await set(`state = 'FAILED'`, []);
        await this.emit(tx, this.step.failed, { ...row.payload, reason: str(out.body, 'code') || `status ${out.status}` });
      }
      return true;
    }
    // CANCELLING: a compensation, retried until the provider confirms it.
    let out;
    try {
      out = await this.provider.call('/cancel', `cancel-${row.booking_ref}`, { trip_id: trip, booking_id: row.provider_id ?? '' }, row.attempts);
    } catch (e) {
      await retryLater(e instanceof Error ? e.message : String(e));
      return true;
    }
    await failpoint(`${svc}.after-cancel`);
    if (out.kind !== 'ok') {
      this.log.error(`${svc}: provider refused a cancellation; retrying (a compensation must succeed)`, { trip, status: out.status, body: out.body });
      await retryLater(`refused with ${out.status}`);
      return true;
    }
    await set(`state = 'CANCELLED'`, []);
    await this.emit(tx, this.step.cancelled, { ...row.payload, [this.step.resultField]: row.provider_id ?? undefined });
    return true;
  }
}
