// The invariants the harness's checkers judge, re-stated over what this
// test can see (the stub world's effects, GET /trips, the outbox tables and
// the Kafka log), so the target can be checked end to end before the
// harness can start it. Each violation names the trip and what is wrong.

import { Client } from 'pg';
import { Kafka, logLevel } from 'kafkajs';
import type { Effect } from './stub-world';
import { services, topics, type Infra } from './infra';

export interface TripView {
  id: string;
  status: string;
  trail: string[];
}

export interface Violation {
  checker: string;
  trip: string;
  what: string;
}

interface Counts {
  book: Effect[];
  cancel: Effect[];
}

/** World-effect checks: all-or-nothing, no-double-effect, compensation-order, pivot. */
export function checkEffects(trips: TripView[], effects: Effect[]): Violation[] {
  const out: Violation[] = [];
  const by = new Map<string, Effect[]>();
  for (const e of effects) {
    if (e.replay) continue;
    const l = by.get(e.trip) ?? [];
    l.push(e);
    by.set(e.trip, l);
  }
  for (const t of trips) {
    const es = by.get(t.id) ?? [];
    const pick = (provider: string, action: string) => es.filter((e) => e.provider === provider && e.action === action && e.status === 'succeeded');
    const flight: Counts = { book: pick('airline', 'book'), cancel: pick('airline', 'cancel') };
    const hotel: Counts = { book: pick('hotel', 'book'), cancel: pick('hotel', 'cancel') };
    const charges = pick('payments', 'charges');
    const refunds = pick('payments', 'refunds');
    const emails = pick('mailer', 'emails');
    const v = (checker: string, what: string) => out.push({ checker, trip: t.id, what });
    for (const [name, c] of [['flight', flight], ['hotel', hotel]] as const) {
      if (c.book.length > 1) v('no-double-effect', `${c.book.length} ${name} bookings`);
      if (c.cancel.length > 1) v('no-double-effect', `${c.cancel.length} ${name} cancellations`);
      if (c.cancel.length > 0 && c.book.length === 0) v('compensation-order', `${name} cancelled but never booked (null compensation)`);
      if (c.cancel.length > 0 && c.book.length > 0 && c.book[0]!.i > c.cancel[0]!.i) v('compensation-order', `${name} booked after its cancellation (hanging)`);
    }
    if (flight.cancel.length > 0 && hotel.book.length > 0 && hotel.book[0]!.i < flight.cancel[0]!.i && (hotel.cancel.length === 0 || hotel.cancel[0]!.i > flight.cancel[0]!.i)) {
      v('compensation-order', 'flight cancelled while the hotel was still booked (reverse order)');
    }
    if (charges.length > 1) v('no-double-effect', `${charges.length} charges`);
    if (emails.length > 1) v('no-double-effect', `${emails.length} itinerary e-mails`);
    if (refunds.length > 0) v('pivot', `a successful charge was refunded`);
    const net = (c: Counts) => c.book.length - c.cancel.length;
    if (t.status === 'BOOKED') {
      if (net(flight) < 1) v('all-or-nothing', 'BOOKED without a flight');
      if (net(hotel) < 1) v('all-or-nothing', 'BOOKED without a hotel');
      if (charges.length < 1) v('all-or-nothing', 'BOOKED without a charge');
      if (emails.length < 1) v('all-or-nothing', 'BOOKED without the itinerary e-mail');
    } else if (t.status === 'ABORTED') {
      if (net(flight) > 0) v('all-or-nothing', 'ABORTED with a flight still booked');
      if (net(hotel) > 0) v('all-or-nothing', 'ABORTED with a hotel still booked');
      if (charges.length > 0) v('pivot', 'ABORTED after a successful charge');
      if (emails.length > 0) v('all-or-nothing', 'ABORTED but the itinerary was e-mailed');
    } else {
      v('saga-terminates', `still ${t.status}`);
    }
  }
  return out;
}

export interface OutboxRow {
  db: string;
  id: string;
  event_id: string;
  aggregate_id: string;
  seq: string;
  type: string;
  topic: string;
  published: boolean;
}

export async function readOutboxes(infra: Infra): Promise<OutboxRow[]> {
  const rows: OutboxRow[] = [];
  for (const s of services) {
    const c = new Client({ connectionString: infra.dbURL(s) });
    await c.connect();
    const r = await c.query<Omit<OutboxRow, 'db'>>('SELECT id, event_id, aggregate_id, seq, type, topic, published_at IS NOT NULL AS published FROM outbox ORDER BY id');
    rows.push(...r.rows.map((x) => ({ ...x, db: s })));
    await c.end();
  }
  return rows;
}

export interface LogRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string;
  eventId: string;
  aggregateId: string;
  seq: number;
  type: string;
  source: string;
}

/**
 * Reads every record of the target's topics up to each partition's high
 * watermark as of the call (records produced later may be read too; what
 * matters is that nothing below a watermark is missed).
 */
export async function readLog(infra: Infra): Promise<LogRecord[]> {
  const k = new Kafka({ clientId: 'trip-test-reader', brokers: [infra.kafka], logLevel: logLevel.NOTHING });
  const admin = k.admin();
  await admin.connect();
  const need = new Map<string, number>(); // topic|partition → high watermark
  for (const t of topics) for (const p of await admin.fetchTopicOffsets(t)) if (Number(p.high) > Number(p.low)) need.set(`${t}|${p.partition}`, Number(p.high));
  await admin.disconnect();
  const out: LogRecord[] = [];
  if (need.size === 0) return out;
  const c = k.consumer({ groupId: `reader-${Date.now()}`, sessionTimeout: 6000, maxWaitTimeInMs: 100 });
  await c.connect();
  await c.subscribe({ topics, fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`log not read up to its watermarks in 30s (${need.size} partitions left)`)), 30_000);
    c.run({
      eachMessage: async ({ topic, partition, message: m }) => {
        const h = (x: string) => m.headers?.[x]?.toString() ?? '';
        out.push({ topic, partition, offset: Number(m.offset), key: m.key?.toString() ?? '', eventId: h('event_id'), aggregateId: h('aggregate_id'), seq: Number(h('seq')), type: h('type'), source: h('source') });
        const k = `${topic}|${partition}`;
        if (need.has(k) && Number(m.offset) + 1 >= need.get(k)!) need.delete(k);
        if (need.size === 0) {
          clearTimeout(timer);
          resolve();
        }
      },
    }).catch(reject);
  });
  await c.disconnect();
  return out;
}

/** Outbox and delivery checks: outbox-drains, no-lost-event, no-phantom-event, per-aggregate-order. */
export function checkOutboxAndLog(rows: OutboxRow[], log: LogRecord[]): Violation[] {
  const out: Violation[] = [];
  const logged = new Map<string, LogRecord>();
  for (const r of log) if (!logged.has(r.eventId)) logged.set(r.eventId, r);
  const committed = new Set(rows.map((r) => r.event_id));
  for (const r of rows) {
    if (!r.published) out.push({ checker: 'outbox-drains', trip: r.aggregate_id, what: `${r.db} outbox row ${r.id} (${r.type}) never published` });
    if (!logged.has(r.event_id)) out.push({ checker: 'no-lost-event', trip: r.aggregate_id, what: `${r.type} seq ${r.seq} from ${r.db} is not in Kafka` });
  }
  for (const r of log) {
    if (!committed.has(r.eventId)) out.push({ checker: 'no-phantom-event', trip: r.aggregateId, what: `${r.type} in Kafka has no committed outbox row` });
    if (r.key !== r.aggregateId) out.push({ checker: 'per-aggregate-order', trip: r.aggregateId, what: `${r.type} keyed ${JSON.stringify(r.key)}, not by its trip` });
  }
  // Per (source, trip): in the log, the first occurrence of each seq must
  // come in seq order (duplicates of earlier seqs later are legal).
  const firsts = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const r of [...log].sort((a, b) => a.partition - b.partition || a.offset - b.offset)) {
    if (seen.has(r.eventId)) continue;
    seen.add(r.eventId);
    const k = `${r.source}|${r.aggregateId}|${r.partition}`;
    const l = firsts.get(k) ?? [];
    l.push(r.seq);
    firsts.set(k, l);
  }
  const partitionsOf = new Map<string, Set<number>>();
  for (const r of log) {
    const k = `${r.source}|${r.aggregateId}`;
    const s = partitionsOf.get(k) ?? new Set<number>();
    s.add(r.partition);
    partitionsOf.set(k, s);
  }
  for (const [k, seqs] of firsts) {
    for (let i = 1; i < seqs.length; i++) {
      if (seqs[i]! < seqs[i - 1]!) {
        const [source, trip] = k.split('|');
        out.push({ checker: 'per-aggregate-order', trip: trip!, what: `${source} published seq ${seqs[i]} after seq ${seqs[i - 1]}` });
        break;
      }
    }
  }
  // Hanging, judged from one source's commit order (its seq): a booking
  // announced after its own cancellation was announced.
  const pairs: Record<string, string> = { FlightBooked: 'FlightCancelled', HotelBooked: 'HotelCancelled' };
  const firstSeq = new Map<string, number>();
  for (const r of rows) {
    const k = `${r.db}|${r.aggregate_id}|${r.type}`;
    const seq = Number(r.seq);
    if (!firstSeq.has(k) || seq < firstSeq.get(k)!) firstSeq.set(k, seq);
  }
  for (const r of rows) {
    const comp = pairs[r.type];
    if (comp === undefined) continue;
    const f = firstSeq.get(`${r.db}|${r.aggregate_id}|${r.type}`)!;
    const c = firstSeq.get(`${r.db}|${r.aggregate_id}|${comp}`);
    if (c !== undefined && f > c && Number(r.seq) === f) out.push({ checker: 'compensation-order', trip: r.aggregate_id, what: `${r.db} committed ${r.type} (seq ${f}) after ${comp} (seq ${c})` });
  }
  for (const [k, ps] of partitionsOf) if (ps.size > 1) out.push({ checker: 'per-aggregate-order', trip: k.split('|')[1]!, what: `events of one trip in ${ps.size} partitions` });
  return out;
}
