// Unit tests: the pieces that need no database or broker.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseDuration } from '../config';
import { catalogue, failpoint, FailpointError, parseAction, resetFailpoints, setupFailpoints } from '../failpoints';
import { isMutant, mutants, setMutant, UnknownMutantError } from '../mutants';
import { decode, MalformedMessage } from '../consumer';
import { recordOf } from '../outbox';
import { parseDatabases } from '../relay';
import { deriveStatus, parseRequest, requestHash } from '../services/trips';
import { HttpError } from '../http';
import { AmbiguousOutcome, Provider } from '../world';
import { StubWorld } from './stub-world';

const mainJS = join(__dirname, '..', 'main.js');

test('durations parse like Go', () => {
  assert.equal(parseDuration('2s'), 2000);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('1m30s'), 90_000);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.throws(() => parseDuration('2'));
  assert.throws(() => parseDuration(''));
});

test('failpoint actions parse per the contract', () => {
  assert.deepEqual(parseAction('crash'), { action: { kind: 'crash' }, nth: 1 });
  assert.deepEqual(parseAction('error@3'), { action: { kind: 'error' }, nth: 3 });
  assert.deepEqual(parseAction('sleep(250ms)@2'), { action: { kind: 'sleep', ms: 250 }, nth: 2 });
  assert.throws(() => parseAction('explode'));
  assert.throws(() => parseAction('crash@0'));
  assert.throws(() => setupFailpoints('no.such.point=crash', '', 'x'), /unknown failpoint/);
  resetFailpoints();
});

test('failpoints fire at the Nth hit only and log reached and fired lines', async () => {
  const log = join(mkdtempSync(join(tmpdir(), 'fp-')), 'fp.jsonl');
  setupFailpoints('flights.after-book=error@2;payments.after-charge=sleep(10ms)', log, 'flights');
  assert.equal(failpoint('flights.after-book'), undefined);
  assert.throws(() => failpoint('flights.after-book'), FailpointError);
  assert.equal(failpoint('flights.after-book'), undefined);
  const t0 = Date.now();
  await failpoint('payments.after-charge');
  assert.ok(Date.now() - t0 >= 9);
  failpoint('relay.after-mark'); // reached, not armed
  failpoint('relay.after-mark');
  const lines = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines, [
    { instance: 'flights', failpoint: 'flights.after-book', hit: 1 },
    { instance: 'flights', failpoint: 'flights.after-book', hit: 2, action: 'error', fired: true },
    { instance: 'flights', failpoint: 'payments.after-charge', hit: 1 },
    { instance: 'flights', failpoint: 'payments.after-charge', hit: 1, action: 'sleep', fired: true },
    { instance: 'flights', failpoint: 'relay.after-mark', hit: 1 },
  ]);
  resetFailpoints();
  assert.equal(failpoint('flights.after-book'), undefined, 'free when off');
});

test('a crash failpoint SIGKILLs the process', () => {
  const r = spawnSync(process.execPath, ['-e', `const f=require(${JSON.stringify(join(__dirname, '..', 'failpoints.js'))}); f.setupFailpoints('relay.after-mark=crash@2','', 'relay'); f.failpoint('relay.after-mark'); f.failpoint('relay.after-mark'); setTimeout(()=>process.exit(0), 2000);`]);
  assert.equal(r.signal, 'SIGKILL');
});

test('--list-failpoints prints the catalogue as JSON', () => {
  const r = spawnSync(process.execPath, [mainJS, '--list-failpoints'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  const got = JSON.parse(r.stdout) as Array<{ name: string; component: string; description: string }>;
  assert.deepEqual(got, catalogue);
  assert.equal(new Set(got.map((p) => p.name)).size, got.length, 'names unique');
  for (const p of got) assert.ok(p.name.startsWith(p.component + '.'), p.name);
});

test('an unknown mutant exits 2, a known one is switched on', () => {
  const r = spawnSync(process.execPath, [mainJS, 'flights'], { env: { ...process.env, SAGACHAOS_MUTANT: 'no-such-bug', LISTEN_ADDR: '127.0.0.1:0' }, encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown mutant "no-such-bug"/);
  assert.throws(() => setMutant('nope'), UnknownMutantError);
  setMutant('no-inbox');
  assert.ok(isMutant('no-inbox'));
  assert.ok(!isMutant('unordered-relay'));
  setMutant('');
  assert.ok(Object.keys(mutants).length >= 5);
});

test('a missing setting exits 2 with its name', () => {
  const r = spawnSync(process.execPath, [mainJS, 'trips'], { env: { PATH: process.env.PATH }, encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /LISTEN_ADDR is not set/);
  const u = spawnSync(process.execPath, [mainJS, 'orders'], { encoding: 'utf8' });
  assert.equal(u.status, 2);
});

test('the status follows the facts, whatever order they arrive in', () => {
  const f = (flight: string | null, hotel: string | null, payment: string | null, tickets: string | null) => deriveStatus({ flight, hotel, payment, tickets });
  assert.equal(f(null, null, null, null), 'PENDING');
  assert.equal(f('BOOKED', 'BOOKED', 'CHARGED', null), 'PENDING');
  assert.equal(f(null, null, 'CHARGED', 'ISSUED'), 'BOOKED', 'tickets before the booking events');
  assert.equal(f('FAILED', null, null, null), 'ABORTED');
  assert.equal(f('CANCELLED', 'BOOKED', null, null), 'ABORTED', 'flights compensates last');
  assert.equal(f('BOOKED', 'CANCELLED', 'DECLINED', null), 'PENDING', 'hotel undone, flight not yet');
});

test('trip requests are validated and fingerprinted', () => {
  const body = { customer: 'c-1', flight: 'FL-12', hotel: 'H-3', nights: 2, card: 'tok_visa', total: 4200 };
  const r = parseRequest(JSON.stringify(body));
  assert.equal(r.flight_outcome, '');
  assert.equal(requestHash(r), requestHash(parseRequest(JSON.stringify({ ...body }))));
  assert.notEqual(requestHash(r), requestHash(parseRequest(JSON.stringify({ ...body, total: 4201 }))));
  for (const bad of ['{', '[]', JSON.stringify({ ...body, nights: 0 }), JSON.stringify({ ...body, customer: '' }), JSON.stringify({ ...body, total: 1.5 })]) {
    assert.throws(() => parseRequest(bad), HttpError, bad);
  }
});

test('records carry the envelope and decode back', () => {
  const rec = recordOf({ id: '7', event_id: 'ev-1', aggregate_id: 't-1', seq: '3', type: 'FlightBooked', topic: 'flights', source: 'flights', payload: '{"trip_id":"t-1"}' });
  assert.equal(rec.key, 't-1');
  const e = decode('flights', 2, { key: Buffer.from(rec.key), value: Buffer.from(rec.value), headers: Object.fromEntries(Object.entries(rec.headers).map(([k, v]) => [k, Buffer.from(v)])), offset: '9', timestamp: '0', attributes: 0 });
  assert.deepEqual({ ...e, payload: e.payload.trip_id }, { eventId: 'ev-1', aggregateId: 't-1', seq: 3, type: 'FlightBooked', source: 'flights', topic: 'flights', partition: 2, offset: '9', payload: 't-1' });
  assert.throws(() => decode('flights', 0, { key: null, value: Buffer.from('{}'), headers: {}, offset: '0', timestamp: '0', attributes: 0 }), MalformedMessage);
});

test('RELAY_DATABASES parses name=URL pairs', () => {
  const m = parseDatabases('trips=postgres://a/trips  flights=postgres://a/f?x=1');
  assert.equal(m.get('flights'), 'postgres://a/f?x=1');
  assert.throws(() => parseDatabases(''));
  assert.throws(() => parseDatabases('trips'));
});

test('provider answers: success, declined, ambiguous, and the same key settles an ambiguous one', async () => {
  const w = new StubWorld();
  await w.start();
  try {
    // Generous: only the hanging call waits it out, and a loaded machine must not fail the others.
    const p = new Provider(w.url('payments'), 2000);
    const ok = await p.call('/charges', 'charge:t-1', { trip_id: 't-1', amount: 10, card: 'tok_visa' });
    assert.equal(ok.kind, 'ok');
    const no = await p.call('/charges', 'charge:t-2', { trip_id: 't-2', amount: 10, card: 'tok_decline' });
    assert.equal(no.kind, 'declined');
    await assert.rejects(p.call('/charges', 'charge:t-3', { trip_id: 't-3', amount: 10, card: 'tok_ambiguous_500' }), AmbiguousOutcome);
    const settled = await p.call('/charges', 'charge:t-3', { trip_id: 't-3', amount: 10, card: 'tok_ambiguous_500' });
    assert.equal(settled.kind, 'ok');
    await assert.rejects(p.call('/charges', 'charge:t-4', { trip_id: 't-4', amount: 10, card: 'tok_ambiguous_hang' }), AmbiguousOutcome);
    assert.equal((await p.call('/charges', 'charge:t-4', { trip_id: 't-4', amount: 10, card: 'tok_ambiguous_hang' })).kind, 'ok');
    await assert.rejects(p.call('/charges', 'charge:t-4', { trip_id: 't-4', amount: 11, card: 'tok_ambiguous_hang' }), AmbiguousOutcome, '409 key reused is not definite');
    const charges = w.effects.filter((e) => e.action === 'charges' && !e.replay && e.status === 'succeeded');
    assert.deepEqual(charges.map((e) => e.trip), ['t-1', 't-3', 't-4'], 'one charge per trip despite the retries');
  } finally {
    await w.close();
  }
});
