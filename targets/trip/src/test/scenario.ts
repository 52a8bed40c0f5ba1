// One end-to-end run: infrastructure, the stub world, the target's
// processes, a workload, faults, then the checks. Used by e2e.test.ts and by
// hand: `node dist/test/scenario.js [trips] [clients] [seed] [mutant]`.

import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkEffects, checkOutboxAndLog, readLog, readOutboxes, type Violation } from './checks';
import { Cluster } from './cluster';
import { startInfra } from './infra';
import { StubWorld } from './stub-world';
import { rng, runWorkload, waitTerminal } from './workload';

export interface ScenarioOptions {
  name: string;
  trips: number;
  clients: number;
  seed: number;
  mutant?: string;
  failpoints?: Record<string, string>;
  /** SIGKILL these instances at random moments while the workload runs. */
  kill?: string[];
  stepTimeout?: string;
  declineRate?: number;
  ambiguousRate?: number;
  /** Injected provider ambiguity (answered 500 after acting). */
  injectedAmbiguity?: number;
  relays?: number;
  terminalDeadlineMs?: number;
}

export interface ScenarioResult {
  name: string;
  dir: string;
  placed: number;
  statuses: Record<string, number>;
  /** How many trips took each path (their trails). */
  paths: Record<string, number>;
  placeMs: number;
  settleMs: number;
  tripsPerSecond: number;
  crashes: Record<string, number>;
  failpointsFired: string[];
  failpointsReached: number;
  effects: number;
  replays: number;
  violations: Violation[];
}

export async function runScenario(o: ScenarioOptions): Promise<ScenarioResult> {
  const dir = mkdtempSync(join(tmpdir(), `trip-${o.name}-`));
  const tag = `t${process.pid}_${o.name.replace(/[^a-z0-9]/gi, '_')}`.toLowerCase();
  const infra = await startInfra(tag);
  const world = new StubWorld({ ambiguousRate: o.injectedAmbiguity ?? 0, random: rng(o.seed + 1) });
  await world.start();
  const cluster = new Cluster(infra, world, { dir, mutant: o.mutant, failpoints: o.failpoints, stepTimeout: o.stepTimeout, relays: o.relays });
  try {
    await cluster.start();
    const rand = rng(o.seed + 2);
    let killing = true;
    const killer = (async () => {
      const victims = o.kill ?? [];
      while (killing && victims.length > 0) {
        await sleep(300 + rand() * 1200);
        if (killing) cluster.kill(victims[Math.floor(rand() * victims.length)]!);
      }
    })();
    let w;
    try {
      w = await runWorkload(cluster.apiURL, { trips: o.trips, clients: o.clients, seed: o.seed, declineRate: o.declineRate, ambiguousRate: o.ambiguousRate });
    } finally {
      killing = false;
      await killer;
    }
    const settled = await waitTerminal(cluster.apiURL, w.placed.map((p) => p.id), o.terminalDeadlineMs ?? 180_000);
    // Let the relays drain what the last transitions wrote (TripBooked, …).
    for (let n = 0; n < 100; n++) {
      if ((await readOutboxes(infra)).every((r) => r.published)) break;
      await sleep(100);
    }
    const rows = await readOutboxes(infra);
    const log = await readLog(infra);
    const violations = [
      ...w.violations.map((what) => ({ checker: 'client-idempotency', trip: '', what })),
      ...checkEffects(settled.trips, world.effects),
      ...checkOutboxAndLog(rows, log),
    ];
    const statuses: Record<string, number> = {};
    for (const t of settled.trips) statuses[t.status] = (statuses[t.status] ?? 0) + 1;
    const paths: Record<string, number> = {};
    for (const t of settled.trips) paths[t.trail.join(' ')] = (paths[t.trail.join(' ')] ?? 0) + 1;
    const fpLines = existsSync(cluster.fpLog) ? readFileSync(cluster.fpLog, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { instance: string; failpoint: string; hit: number; action?: string }) : [];
    const totalMs = w.ms + settled.ms;
    return {
      name: o.name,
      dir,
      placed: w.placed.length,
      statuses,
      paths,
      placeMs: w.ms,
      settleMs: settled.ms,
      tripsPerSecond: Math.round((w.placed.length / (totalMs / 1000)) * 10) / 10,
      crashes: cluster.crashes(),
      failpointsFired: fpLines.filter((l) => l.action !== undefined).map((l) => `${l.instance}:${l.failpoint}@${l.hit}=${l.action}`),
      failpointsReached: new Set(fpLines.map((l) => l.failpoint)).size,
      effects: world.effects.filter((e) => !e.replay).length,
      replays: world.effects.filter((e) => e.replay).length,
      violations,
    };
  } finally {
    await cluster.stop();
    await world.close();
    await infra.close();
  }
}

if (require.main === module) {
  const [trips = '40', clients = '4', seed = '1', mutant = ''] = process.argv.slice(2);
  runScenario({ name: 'manual', trips: Number(trips), clients: Number(clients), seed: Number(seed), mutant }).then(
    (r) => {
      console.log(JSON.stringify({ ...r, violations: r.violations.slice(0, 20), violationCount: r.violations.length }, null, 2));
      process.exit(0);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
