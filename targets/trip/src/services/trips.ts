// The trips service: the workload API and the trip's status. It starts a
// saga (TripRequested) and from then on only listens: every step event of
// every service updates what trips knows about the trip, and the status is
// derived from those facts, whatever order they arrive in (they travel on
// four topics, so no order between them is guaranteed):
//
//   TicketsIssued                        ⇒ BOOKED
//   FlightBookingFailed | FlightCancelled ⇒ ABORTED (flights undoes last)
//   otherwise                            ⇒ PENDING (the semantic lock)
//
// The step deadline: every fact pushes the trip's deadline out by
// STEP_TIMEOUT. When it passes before the pivot, trips publishes
// TripTimedOut once, and payments decides whether the trip goes forward or
// unwinds; after the pivot it publishes TicketsRequested (forward only).

import { createHash, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { Tx } from '../db';
import { withTx } from '../db';
import { Ev, Topic, type EventType, type Itinerary } from '../events';
import { failpoint } from '../failpoints';
import { apiError, HttpError, type Req, type Res, type Route } from '../http';
import { errMsg, type Logger } from '../log';
import { isMutant } from '../mutants';
import { addToOutbox } from '../outbox';
import { applyOnce, type Envelope } from '../consumer';
import { setTimeout as sleep } from 'node:timers/promises';

export const Status = { pending: 'PENDING', booked: 'BOOKED', aborted: 'ABORTED' } as const;

export const tripsSchema = `
CREATE TABLE IF NOT EXISTS trips (
  id              text PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  request_hash    text NOT NULL,
  request         jsonb NOT NULL,
  status          text NOT NULL,          -- PENDING, BOOKED, ABORTED
  flight          text,                   -- BOOKED, FAILED, CANCELLED: what flights said last
  hotel           text,
  payment         text,                   -- CHARGED, DECLINED, CANCELLED
  tickets         text,                   -- ISSUED
  timed_out       boolean NOT NULL DEFAULT false,
  trail           text[] NOT NULL DEFAULT '{}',
  deadline        timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS trips_deadline ON trips (deadline) WHERE status = 'PENDING';
`;

/** The step events trips applies, and the fact each sets. */
const facts: Record<string, { column: 'flight' | 'hotel' | 'payment' | 'tickets'; value: string; trail: string }> = {
  [Ev.FlightBooked]: { column: 'flight', value: 'BOOKED', trail: 'book-flight' },
  [Ev.FlightBookingFailed]: { column: 'flight', value: 'FAILED', trail: 'flight-failed' },
  [Ev.FlightCancelled]: { column: 'flight', value: 'CANCELLED', trail: 'cancel-flight' },
  [Ev.HotelBooked]: { column: 'hotel', value: 'BOOKED', trail: 'book-hotel' },
  [Ev.HotelBookingFailed]: { column: 'hotel', value: 'FAILED', trail: 'hotel-failed' },
  [Ev.HotelCancelled]: { column: 'hotel', value: 'CANCELLED', trail: 'cancel-hotel' },
  [Ev.PaymentCharged]: { column: 'payment', value: 'CHARGED', trail: 'charge' },
  [Ev.PaymentDeclined]: { column: 'payment', value: 'DECLINED', trail: 'charge-declined' },
  [Ev.PaymentCancelled]: { column: 'payment', value: 'CANCELLED', trail: 'charge-cancelled' },
  [Ev.TicketsIssued]: { column: 'tickets', value: 'ISSUED', trail: 'issue-tickets' },
};

export const tripsTypes = new Set<string>(Object.keys(facts));

/** Final facts never go back: a late FlightBooked does not undo FlightCancelled. */
const finalValues = new Set(['FAILED', 'CANCELLED', 'ISSUED', 'DECLINED']);

export interface TripFacts {
  flight: string | null;
  hotel: string | null;
  payment: string | null;
  tickets: string | null;
}

/** The status a trip's facts imply (pure: tested on its own). */
export function deriveStatus(f: TripFacts): string {
  if (f.tickets === 'ISSUED') return Status.booked;
  if (f.flight === 'FAILED' || f.flight === 'CANCELLED') return Status.aborted;
  return Status.pending;
}

interface TripRow extends TripFacts {
  id: string;
  status: string;
  idempotency_key: string;
  request: Itinerary;
  timed_out: boolean;
  trail: string[];
}

/** Validates a POST /trips body into an itinerary (without the id). */
export function parseRequest(raw: string): Omit<Itinerary, 'trip_id'> {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw new HttpError(400, 'bad_request', `body: ${errMsg(e)}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new HttpError(400, 'bad_request', 'body must be a JSON object');
  const o = v as Record<string, unknown>;
  const s = (k: string, required: boolean): string => {
    const x = o[k];
    if (x === undefined && !required) return '';
    if (typeof x !== 'string' || (required && x.trim() === '')) throw new HttpError(400, 'bad_request', `${k} must be a non-empty string`);
    return x;
  };
  const n = (k: string, min: number): number => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < min) throw new HttpError(400, 'bad_request', `${k} must be an integer ≥ ${min}`);
    return x;
  };
  return {
    customer: s('customer', true),
    flight: s('flight', true),
    hotel: s('hotel', true),
    nights: n('nights', 1),
    card: s('card', true),
    total: n('total', 0),
    flight_outcome: s('flight_outcome', false),
    hotel_outcome: s('hotel_outcome', false),
  };
}

/** The request's fingerprint: same key + same request → replay; other request → 409. */
export function requestHash(r: Omit<Itinerary, 'trip_id'>): string {
  const canon = JSON.stringify([r.customer, r.flight, r.hotel, r.nights, r.card, r.total, r.flight_outcome, r.hotel_outcome]);
  return createHash('sha256').update(canon).digest('hex');
}

function view(r: TripRow) {
  const q = r.request;
  return {
    id: r.id,
    status: r.status,
    idempotency_key: r.idempotency_key,
    customer: q.customer,
    flight: q.flight,
    hotel: q.hotel,
    nights: q.nights,
    card: q.card,
    total: q.total,
    trail: r.trail,
    steps: { flight: r.flight, hotel: r.hotel, payment: r.payment, tickets: r.tickets },
  };
}

export class TripsService {
  constructor(
    private readonly pool: Pool,
    private readonly stepTimeoutMs: number,
    private readonly log: Logger,
  ) {}

  private emit(tx: Tx, type: EventType, p: Itinerary): Promise<number> {
    return addToOutbox(tx, 'trips', { topic: Topic.trips, type, payload: p });
  }

  routes(): Array<[string, string, Route]> {
    return [
      ['POST', '/trips', (req) => this.create(req)],
      ['GET', '/trips/:id', (_req, [id]) => this.get(id!)],
      ['GET', '/trips', (req) => this.list(req)],
    ];
  }

  private async create(req: Req): Promise<Res> {
    const keyHeader = req.headers['idempotency-key'];
    const key = (Array.isArray(keyHeader) ? keyHeader[0] : keyHeader)?.trim() ?? '';
    if (key === '') return apiError(400, 'bad_request', 'Idempotency-Key header is required');
    const r = parseRequest(await req.body());
    const hash = requestHash(r);
    // The unique key makes a concurrent repeat wait for this insert and
    // then create nothing.
    const created = await withTx(this.pool, async (tx) => {
      const id = `t-${randomUUID()}`;
      const ins = await tx.query<{ id: string }>(
        `INSERT INTO trips (id, idempotency_key, request_hash, request, status, trail, deadline)
         VALUES ($1, $2, $3, $4, 'PENDING', ARRAY['request-trip'], now() + $5::int * interval '1 millisecond')
         ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
        [id, key, hash, JSON.stringify({ trip_id: id, ...r }), this.stepTimeoutMs],
      );
      if (ins.rowCount === 0) return undefined;
      await this.emit(tx, Ev.TripRequested, { trip_id: id, ...r });
      return id;
    });
    if (created !== undefined) {
      await failpoint('trips.after-create');
      return { status: 202, body: { id: created, status: Status.pending } };
    }
    const prev = (await this.pool.query<{ id: string; request_hash: string; status: string }>('SELECT id, request_hash, status FROM trips WHERE idempotency_key = $1', [key])).rows[0];
    if (prev === undefined) throw new Error('idempotency key vanished');
    if (prev.request_hash !== hash) return apiError(409, 'idempotency_key_reused', 'this Idempotency-Key was used with a different request');
    return { status: 202, body: { id: prev.id, status: Status.pending }, headers: { 'Idempotent-Replayed': 'true' } };
  }

  private async get(id: string): Promise<Res> {
    const r = (await this.pool.query<TripRow>('SELECT * FROM trips WHERE id = $1', [id])).rows[0];
    if (r === undefined) return apiError(404, 'not_found', 'no such trip');
    return { status: 200, body: view(r) };
  }

  private async list(req: Req): Promise<Res> {
    const key = req.query.get('idempotency_key');
    const rows = key
      ? (await this.pool.query<TripRow>('SELECT * FROM trips WHERE idempotency_key = $1', [key])).rows
      : (await this.pool.query<TripRow>('SELECT * FROM trips ORDER BY created_at, id')).rows;
    return { status: 200, body: rows.map(view) };
  }

  /** Applies one step event to the trip's facts and status. */
  async handle(e: Envelope): Promise<void> {
    const fact = facts[e.type];
    if (fact === undefined) return;
    await applyOnce(this.pool, 'trips', e, 'trips.after-apply', async (tx) => {
      const t = (await tx.query<TripRow>('SELECT * FROM trips WHERE id = $1 FOR UPDATE', [e.aggregateId])).rows[0];
      if (t === undefined) {
        this.log.error('event for an unknown trip, ignored', { trip: e.aggregateId, type: e.type });
        return;
      }
      const current = t[fact.column];
      const nothing = e.payload.nothing_booked === true;
      if (current !== null && finalValues.has(current)) return;
      t[fact.column] = fact.value;
      const trail = nothing ? t.trail : [...t.trail, fact.trail];
      const before = t.status;
      const status = before === Status.pending ? deriveStatus(t) : before;
      if (status !== before) trail.push(status === Status.booked ? 'booked' : 'aborted');
      await tx.query(
        `UPDATE trips SET ${fact.column} = $2, status = $3, trail = $4, updated_at = now(),
           deadline = now() + $5::int * interval '1 millisecond' WHERE id = $1`,
        [t.id, fact.value, status, trail, this.stepTimeoutMs],
      );
      if (status !== before) await this.emit(tx, status === Status.booked ? Ev.TripBooked : Ev.TripAborted, t.request);
    });
  }

  /** The step-deadline loop. */
  async runTimers(signal: AbortSignal, tickMs: number): Promise<void> {
    while (!signal.aborted) {
      let n = 0;
      if (!isMutant('no-step-timeout')) {
        try {
          n = await this.timeouts();
        } catch (e) {
          if (!signal.aborted) this.log.warn('trip timers', { err: errMsg(e) });
        }
      }
      if (n === 0) await sleep(tickMs, undefined, { signal }).catch(() => undefined);
    }
  }

  private async timeouts(): Promise<number> {
    const ids = (await this.pool.query<{ id: string }>(`SELECT id FROM trips WHERE status = 'PENDING' AND deadline < now() ORDER BY deadline LIMIT 100`)).rows.map((r) => r.id);
    for (const id of ids) {
      const acted = await withTx(this.pool, async (tx) => {
        const t = (await tx.query<TripRow>(`SELECT * FROM trips WHERE id = $1 AND status = 'PENDING' AND deadline < now() FOR UPDATE SKIP LOCKED`, [id])).rows[0];
        if (t === undefined) return false;
        const later = `deadline = now() + ${this.stepTimeoutMs} * interval '1 millisecond', updated_at = now()`;
        if (t.payment === 'CHARGED') {
          // After the pivot: only forward. Ask again; tickets answers again.
          this.log.info('tickets step timed out, asking again', { trip: id });
          await tx.query(`UPDATE trips SET ${later}, trail = array_append(trail, 'tickets-requested') WHERE id = $1`, [id]);
          await this.emit(tx, Ev.TicketsRequested, t.request);
          return true;
        }
        if (!t.timed_out) {
          // Before the pivot: unwind, starting where the point of no return is decided.
          this.log.info('trip step timed out, aborting', { trip: id, steps: { flight: t.flight, hotel: t.hotel, payment: t.payment } });
          await tx.query(`UPDATE trips SET ${later}, timed_out = true, trail = array_append(trail, 'timed-out') WHERE id = $1`, [id]);
          await this.emit(tx, Ev.TripTimedOut, t.request);
          return true;
        }
        // Unwinding already; the compensations retry on their own.
        await tx.query(`UPDATE trips SET ${later} WHERE id = $1`, [id]);
        return false;
      });
      if (acted) await failpoint('trips.after-timeout');
    }
    return ids.length;
  }
}
