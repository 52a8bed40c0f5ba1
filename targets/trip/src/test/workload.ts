// The workload driver: several clients placing trips through POST /trips
// with an Idempotency-Key, some repeated (same key, same body: must replay
// the first answer) and some reused with another body (must be refused),
// with outcome fields that make providers decline or answer ambiguously.

import { setTimeout as sleep } from 'node:timers/promises';

export interface WorkloadOptions {
  trips: number;
  clients: number;
  seed: number;
  /** Share of trips whose bookings or charge are declined (each step drawn separately). */
  declineRate?: number;
  ambiguousRate?: number;
}

export interface Placed {
  key: string;
  id: string;
  body: Record<string, unknown>;
}

export interface WorkloadResult {
  placed: Placed[];
  violations: string[];
  ms: number;
}

/** mulberry32: a small seeded PRNG, so a seed replays the same workload. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function post(api: string, key: string, body: unknown): Promise<{ status: number; json: Record<string, unknown>; replayed: boolean }> {
  // Bounded by time, not tries: a restart of trips on a loaded machine can
  // take several seconds, and the same key again is always safe.
  const giveUp = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${api}/trips`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
      const json = (await res.json()) as Record<string, unknown>;
      if (res.status === 503 && Date.now() < giveUp) {
        await sleep(200);
        continue;
      }
      return { status: res.status, json, replayed: res.headers.get('idempotent-replayed') === 'true' };
    } catch (e) {
      // No answer (the trips process may be down): the same key again is safe.
      if (Date.now() >= giveUp) throw e;
      await sleep(200);
    }
  }
}

export async function runWorkload(api: string, o: WorkloadOptions): Promise<WorkloadResult> {
  const rand = rng(o.seed);
  const decline = o.declineRate ?? 0.15;
  const amb = o.ambiguousRate ?? 0.1;
  const outcome = () => {
    const x = rand();
    if (x < decline) return 'decline';
    if (x < decline + amb / 2) return 'ambiguous_500';
    if (x < decline + amb) return 'ambiguous_hang';
    return 'ok';
  };
  const card = () => {
    const x = rand();
    if (x < decline) return 'tok_decline';
    if (x < decline + amb / 2) return 'tok_ambiguous_500';
    if (x < decline + amb) return 'tok_ambiguous_hang';
    return 'tok_visa';
  };
  const plan = Array.from({ length: o.trips }, (_, i) => ({
    key: `k-${o.seed}-${i}`,
    repeat: rand() < 0.2,
    reuse: rand() < 0.05,
    body: {
      customer: `c-${i % 7}`,
      flight: `FL-${Math.floor(rand() * 40)}`,
      hotel: `H-${Math.floor(rand() * 20)}`,
      nights: 1 + Math.floor(rand() * 5),
      card: card(),
      total: 1000 + Math.floor(rand() * 9000),
      flight_outcome: outcome(),
      hotel_outcome: outcome(),
    },
  }));
  const placed: Placed[] = [];
  const violations: string[] = [];
  const t0 = Date.now();
  let next = 0;
  const client = async () => {
    while (next < plan.length) {
      const p = plan[next++]!;
      const a = await post(api, p.key, p.body);
      if (a.status !== 202 || typeof a.json.id !== 'string') {
        violations.push(`POST ${p.key}: ${a.status} ${JSON.stringify(a.json)}`);
        continue;
      }
      placed.push({ key: p.key, id: a.json.id, body: p.body });
      if (p.repeat) {
        const b = await post(api, p.key, p.body);
        if (b.status !== 202 || b.json.id !== a.json.id || !b.replayed) violations.push(`repeat of ${p.key}: ${b.status} ${JSON.stringify(b.json)} replayed=${b.replayed}, want 202 ${a.json.id} replayed`);
      }
      if (p.reuse) {
        const c = await post(api, p.key, { ...p.body, total: (p.body.total as number) + 1 });
        if (c.status !== 409 || c.json.code !== 'idempotency_key_reused') violations.push(`reuse of ${p.key} with another body: ${c.status} ${JSON.stringify(c.json)}, want 409`);
      }
    }
  };
  await Promise.all(Array.from({ length: o.clients }, client));
  return { placed, violations, ms: Date.now() - t0 };
}

export interface TripState {
  id: string;
  status: string;
  trail: string[];
}

/** Polls GET /trips until every placed trip is terminal or the deadline passes. */
export async function waitTerminal(api: string, ids: string[], deadlineMs: number): Promise<{ trips: TripState[]; ms: number }> {
  const t0 = Date.now();
  const want = new Set(ids);
  let trips: TripState[] = [];
  while (true) {
    try {
      const res = await fetch(`${api}/trips`, { signal: AbortSignal.timeout(5000) });
      if (res.ok) trips = ((await res.json()) as TripState[]).filter((t) => want.has(t.id));
    } catch {
      /* trips may be restarting */
    }
    const pending = trips.length < want.size || trips.some((t) => t.status === 'PENDING');
    if (!pending || Date.now() - t0 > deadlineMs) return { trips, ms: Date.now() - t0 };
    await sleep(250);
  }
}
