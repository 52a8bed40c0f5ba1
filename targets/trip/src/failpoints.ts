// Named crash points (docs/target-contract.md, "Processes and env").
//
// A failpoint is an `await failpoint('relay.after-publish')` placed where a
// crash, an error or a stall matters for correctness: between a broker ack
// and the mark in the relay, between a provider's answer and the local
// commit in a service, and so on. The harness arms points through
// SAGACHAOS_FAILPOINTS ("name=crash@3;other=sleep(2s);x=error") and learns
// which points were reached through SAGACHAOS_FAILPOINT_LOG: one JSON line
// the first time a point is reached in this process's life, and one line
// each time an armed point fires.
//
// When nothing is armed and no log is configured, failpoint() is one
// boolean test and returns undefined, so the points stay in production code.

import { closeSync, openSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseDuration } from './config';

export interface FailpointInfo {
  name: string;
  component: string;
  description: string;
}

/** Every point the trip target declares; a name not listed here cannot be armed. */
export const catalogue: readonly FailpointInfo[] = [
  { name: 'relay.after-select', component: 'relay', description: 'rows selected and locked FOR UPDATE, nothing produced yet' },
  { name: 'relay.after-publish', component: 'relay', description: 'broker acknowledged the batch, rows not yet marked published' },
  { name: 'relay.after-mark', component: 'relay', description: 'rows marked published and committed' },
  { name: 'relay.before-cleanup', component: 'relay', description: 'retention cleanup about to delete old published rows' },
  { name: 'trips.after-create', component: 'trips', description: 'trip and TripRequested committed, HTTP reply not yet sent' },
  { name: 'trips.after-apply', component: 'trips', description: 'a step event applied to the trip inside its transaction, not yet committed' },
  { name: 'trips.after-commit', component: 'trips', description: 'a step event applied and committed, offset not yet committed' },
  { name: 'trips.after-timeout', component: 'trips', description: 'a step deadline handled (TripTimedOut or TicketsRequested committed), nothing else done' },
  { name: 'flights.after-apply', component: 'flights', description: 'an event applied to the flight booking inside its transaction, not yet committed' },
  { name: 'flights.after-commit', component: 'flights', description: 'an event applied and committed, offset not yet committed' },
  { name: 'flights.after-book', component: 'flights', description: 'the airline answered the booking, result not yet committed' },
  { name: 'flights.after-cancel', component: 'flights', description: 'the airline answered the cancellation, result not yet committed' },
  { name: 'flights.after-result', component: 'flights', description: 'an airline answer and its event committed' },
  { name: 'hotels.after-apply', component: 'hotels', description: 'an event applied to the hotel booking inside its transaction, not yet committed' },
  { name: 'hotels.after-commit', component: 'hotels', description: 'an event applied and committed, offset not yet committed' },
  { name: 'hotels.after-book', component: 'hotels', description: 'the hotel chain answered the booking, result not yet committed' },
  { name: 'hotels.after-cancel', component: 'hotels', description: 'the hotel chain answered the cancellation, result not yet committed' },
  { name: 'hotels.after-result', component: 'hotels', description: 'a hotel chain answer and its event committed' },
  { name: 'payments.after-apply', component: 'payments', description: 'an event applied to the payment inside its transaction, not yet committed' },
  { name: 'payments.after-commit', component: 'payments', description: 'an event applied and committed, offset not yet committed' },
  { name: 'payments.after-charge', component: 'payments', description: 'the payments provider charged (or declined), result not yet committed' },
  { name: 'payments.after-result', component: 'payments', description: 'a charge result and its event committed' },
  { name: 'tickets.after-apply', component: 'tickets', description: 'an event applied to the ticket issue inside its transaction, not yet committed' },
  { name: 'tickets.after-commit', component: 'tickets', description: 'an event applied and committed, offset not yet committed' },
  { name: 'tickets.after-email', component: 'tickets', description: 'the mailer accepted the itinerary e-mail, tickets not yet marked issued' },
  { name: 'tickets.after-result', component: 'tickets', description: 'tickets issued and TicketsIssued committed' },
];

export class FailpointError extends Error {
  override name = 'FailpointError';
}

type Action = { kind: 'crash' } | { kind: 'error' } | { kind: 'sleep'; ms: number };

interface Point {
  hits: number;
  reached: boolean;
  action?: Action;
  nth: number;
}

const points = new Map<string, Point>(catalogue.map((p) => [p.name, { hits: 0, reached: false, nth: 1 }]));
let active = false;
let logFd: number | undefined;
let instance = '';

/**
 * Arms the points in spec (the SAGACHAOS_FAILPOINTS format) and opens the
 * coverage log (empty: none). Called once at start, before any failpoint().
 */
export function setupFailpoints(spec: string, logPath: string, inst: string): void {
  instance = inst;
  for (const raw of spec.split(';')) {
    const part = raw.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq < 0) throw new Error(`failpoint ${JSON.stringify(part)}: want name=action[@N]`);
    const name = part.slice(0, eq).trim();
    const p = points.get(name);
    if (p === undefined) throw new Error(`unknown failpoint ${JSON.stringify(name)} (see --list-failpoints)`);
    const { action, nth } = parseAction(part.slice(eq + 1).trim());
    p.action = action;
    p.nth = nth;
    active = true;
  }
  if (logPath !== '') {
    logFd = openSync(logPath, 'a', 0o644);
    active = true;
  }
}

export function parseAction(s: string): { action: Action; nth: number } {
  let nth = 1;
  let body = s;
  const at = s.lastIndexOf('@');
  if (at >= 0) {
    const n = s.slice(at + 1);
    if (!/^\d+$/.test(n) || Number(n) < 1) throw new Error(`bad hit count ${JSON.stringify(n)} (want @N, N ≥ 1)`);
    nth = Number(n);
    body = s.slice(0, at);
  }
  if (body === 'crash' || body === 'error') return { action: { kind: body }, nth };
  const m = /^sleep\((.+)\)$/.exec(body);
  if (m !== null) {
    const ms = parseDuration(m[1] as string);
    return { action: { kind: 'sleep', ms }, nth };
  }
  throw new Error(`unknown action ${JSON.stringify(body)} (want crash, error or sleep(DURATION))`);
}

/**
 * Marks that the code reached the named point and performs its action if it
 * is armed for this hit: crash never returns (SIGKILL), sleep resolves after
 * the pause, error throws FailpointError as if the step's I/O had failed.
 * Returns undefined when failpoints are off, so `await` costs a microtask.
 */
export function failpoint(name: string): Promise<void> | undefined {
  if (!active) return undefined;
  const p = points.get(name);
  if (p === undefined) throw new Error(`failpoint: undeclared point ${name}`);
  p.hits++;
  const hit = p.hits;
  if (!p.reached) {
    p.reached = true;
    writeLog(name, hit);
  }
  const a = p.action;
  if (a === undefined || hit !== p.nth) return undefined;
  writeLog(name, hit, a.kind);
  switch (a.kind) {
    case 'crash':
      process.stderr.write(`failpoint ${name}: crash at hit ${hit}\n`);
      process.kill(process.pid, 'SIGKILL');
      // SIGKILL is delivered asynchronously; never let the caller go on.
      return new Promise<void>(() => {});
    case 'sleep':
      return sleep(a.ms).then(() => undefined);
    case 'error':
      throw new FailpointError(`${name} (hit ${hit}): injected error`);
  }
}

/** One line per write(2): a crash right after still leaves it on disk. */
function writeLog(name: string, hit: number, action?: string): void {
  if (logFd === undefined) return;
  const line: Record<string, unknown> = { instance, failpoint: name, hit };
  if (action !== undefined) {
    line.action = action;
    line.fired = true;
  }
  writeSync(logFd, JSON.stringify(line) + '\n');
}

/** Disarms everything (tests). */
export function resetFailpoints(): void {
  active = false;
  for (const p of points.values()) {
    p.hits = 0;
    p.reached = false;
    p.action = undefined;
    p.nth = 1;
  }
  if (logFd !== undefined) closeSync(logFd);
  logFd = undefined;
}
