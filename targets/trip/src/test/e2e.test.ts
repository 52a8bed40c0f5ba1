// End-to-end tests of the trip target on real PostgreSQL and Kafka (the
// harness's `sagachaos env up`), with the stub world standing in for the
// harness's providers. Slow (tens of seconds each): `npm run test:e2e`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runScenario, type ScenarioOptions, type ScenarioResult } from './scenario';

function report(r: ScenarioResult): void {
  const { violations, ...rest } = r;
  console.log(JSON.stringify({ ...rest, violations: violations.length, first: violations.slice(0, 5) }));
}

async function valid(o: ScenarioOptions): Promise<ScenarioResult> {
  const r = await runScenario(o);
  report(r);
  assert.deepEqual(r.violations, [], `violations in ${r.dir}`);
  assert.equal(r.placed, o.trips);
  assert.equal((r.statuses.BOOKED ?? 0) + (r.statuses.ABORTED ?? 0), o.trips, 'every trip terminal');
  return r;
}

test('calm: trips from several clients with declines and ambiguous answers all end consistent', { timeout: 240_000 }, async () => {
  const r = await valid({ name: 'calm', trips: 80, clients: 6, seed: 1 });
  assert.ok((r.statuses.BOOKED ?? 0) > 0 && (r.statuses.ABORTED ?? 0) > 0, 'both outcomes reached');
  assert.ok(r.replays > 0, 'some provider answers were replays (ambiguous answers retried with the same key)');
});

test('crash at failpoints: every process SIGKILLs itself at an armed point and restarts', { timeout: 300_000 }, async () => {
  const failpoints: Record<string, string> = {
    'relay-1': 'relay.after-publish=crash@3',
    'relay-2': 'relay.after-select=crash@4',
    trips: 'trips.after-apply=crash@7',
    flights: 'flights.after-book=crash@4',
    hotels: 'hotels.after-commit=crash@5',
    payments: 'payments.after-charge=crash@3',
    tickets: 'tickets.after-email=crash@2',
  };
  // A step timeout longer than a restart (node start-up plus the session
  // timeout of the dead member), so most trips reach the later points.
  const r = await valid({ name: 'failpoint-crash', trips: 60, clients: 4, seed: 2, failpoints, stepTimeout: '10s' });
  for (const [inst, spec] of Object.entries(failpoints)) {
    const name = spec.split('=')[0]!;
    assert.ok(r.failpointsFired.some((f) => f.startsWith(`${inst}:${name}@`)), `${inst} crashed at ${name}`);
  }
});

test('crash at the commit points: after the provider answered and after the local commit', { timeout: 300_000 }, async () => {
  const failpoints: Record<string, string> = {
    'relay-1': 'relay.after-mark=crash@2',
    trips: 'trips.after-create=crash@5',
    flights: 'flights.after-result=crash@3',
    hotels: 'hotels.after-cancel=crash@1',
    payments: 'payments.after-commit=crash@4',
    tickets: 'tickets.after-result=crash@3',
  };
  await valid({ name: 'commit-crash', trips: 60, clients: 4, seed: 3, failpoints });
});

test('error and sleep failpoints: a failed step is retried, a stalled one times out safely', { timeout: 300_000 }, async () => {
  await valid({
    name: 'error-sleep',
    trips: 50,
    clients: 4,
    seed: 4,
    stepTimeout: '2s',
    failpoints: {
      'relay-2': 'relay.after-publish=sleep(3s)@2',
      flights: 'flights.after-apply=error@2',
      payments: 'payments.after-charge=sleep(3s)@2',
      hotels: 'hotels.after-book=error@3',
      tickets: 'tickets.after-apply=error@1',
    },
  });
});

test('random SIGKILLs of every component while the workload runs', { timeout: 300_000 }, async () => {
  await valid({
    name: 'random-kills',
    trips: 60,
    clients: 4,
    seed: 5,
    injectedAmbiguity: 0.1,
    kill: ['trips', 'flights', 'hotels', 'payments', 'tickets', 'relay-1', 'relay-2'],
  });
});

test('kfake group corpse: the consumer recovers partitions held by a predecessor killed in JoinGroup', { timeout: 400_000 }, async () => {
  const { trial } = await import('./kfake-corpse');
  const { startInfra } = await import('./infra');
  const infra = await startInfra('corpse');
  try {
    for (let n = 0; n < 3; n++) {
      const r = await trial(infra.kafka, n, 'reaper');
      console.log(JSON.stringify({ trial: n, ...r }));
      assert.equal(r.received, r.want, `trial ${n}: every partition consumed`);
    }
  } finally {
    await infra.close();
  }
});
