// Starts the trip target's processes as the harness would (one OS process
// per instance, env from the manifest's templates, a restart after a crash)
// and talks to its workload API.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Infra } from './infra';
import type { StubWorld } from './stub-world';

const mainJS = resolve(__dirname, '../main.js');

const handedOut = new Set<number>();

/** A free loopback port, never one this process handed out before. */
async function freePort(): Promise<number> {
  for (;;) {
    const p = await probePort();
    if (!handedOut.has(p)) {
      handedOut.add(p);
      return p;
    }
  }
}

function probePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const p = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => res(p));
    });
  });
}

export interface InstanceSpec {
  name: string;
  service: string;
  env: Record<string, string>;
  failpoints?: string;
}

interface Running {
  spec: InstanceSpec;
  listen: string;
  proc?: ChildProcess;
  crashes: number;
  /** Healthy since its last start (the killer only kills what is up). */
  up: boolean;
}

export interface ClusterOptions {
  dir: string;
  mutant?: string;
  /** Failpoints per instance name, armed in the first incarnation only. */
  failpoints?: Record<string, string>;
  stepTimeout?: string;
  relays?: number;
}

export class Cluster {
  private readonly instances: Running[] = [];
  private stopping = false;
  readonly fpLog: string;

  constructor(
    private readonly infra: Infra,
    private readonly world: StubWorld,
    private readonly opts: ClusterOptions,
  ) {
    mkdirSync(opts.dir, { recursive: true });
    this.fpLog = join(opts.dir, 'failpoints.jsonl');
  }

  get apiURL(): string {
    return `http://${this.instances.find((i) => i.spec.name === 'trips')!.listen}`;
  }

  crashes(): Record<string, number> {
    return Object.fromEntries(this.instances.filter((i) => i.crashes > 0).map((i) => [i.spec.name, i.crashes]));
  }

  async start(): Promise<void> {
    const i = this.infra;
    const common = { KAFKA_BROKERS: i.kafka, CALL_TIMEOUT: '1s', TRIP_LOG_LEVEL: 'info' };
    const specs: InstanceSpec[] = [
      { name: 'trips', service: 'trips', env: { ...common, DATABASE_URL: i.dbURL('trips'), STEP_TIMEOUT: this.opts.stepTimeout ?? '3s' } },
      { name: 'flights', service: 'flights', env: { ...common, DATABASE_URL: i.dbURL('flights'), AIRLINE_URL: this.world.url('airline') } },
      { name: 'hotels', service: 'hotels', env: { ...common, DATABASE_URL: i.dbURL('hotels'), HOTEL_URL: this.world.url('hotel') } },
      { name: 'payments', service: 'payments', env: { ...common, DATABASE_URL: i.dbURL('payments'), PAYMENTS_URL: this.world.url('payments') } },
      { name: 'tickets', service: 'tickets', env: { ...common, DATABASE_URL: i.dbURL('tickets'), MAILER_URL: this.world.url('mailer') } },
    ];
    const relays = this.opts.relays ?? 2;
    for (let n = 1; n <= relays; n++) {
      specs.push({
        name: relays === 1 ? 'relay' : `relay-${n}`,
        service: 'relay',
        env: { ...common, RELAY_DATABASES: ['trips', 'flights', 'hotels', 'payments', 'tickets'].map((s) => `${s}=${i.dbURL(s)}`).join(' '), RELAY_BATCH: '5' },
      });
    }
    for (const spec of specs) {
      spec.failpoints = this.opts.failpoints?.[spec.name] ?? '';
      const r: Running = { spec, listen: `127.0.0.1:${await freePort()}`, crashes: 0, up: false };
      this.instances.push(r);
      this.spawn(r);
    }
    await Promise.all(this.instances.map((r) => this.waitHealthy(r)));
  }

  private spawn(r: Running): void {
    const out = createWriteStream(join(this.opts.dir, `${r.spec.name}.log`), { flags: 'a' });
    const env = {
      ...process.env,
      ...r.spec.env,
      LISTEN_ADDR: r.listen,
      SAGACHAOS_INSTANCE: r.spec.name,
      SAGACHAOS_MUTANT: this.opts.mutant ?? '',
      SAGACHAOS_FAILPOINTS: r.crashes === 0 ? (r.spec.failpoints ?? '') : '',
      SAGACHAOS_FAILPOINT_LOG: this.fpLog,
    };
    const p = spawn(process.execPath, [mainJS, r.spec.service], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    p.stdout!.pipe(out, { end: false });
    p.stderr!.pipe(out, { end: false });
    r.proc = p;
    r.up = false;
    void this.waitHealthy(r).then(
      () => {
        if (r.proc === p) r.up = true;
      },
      () => undefined,
    );
    p.on('exit', (code, signal) => {
      r.up = false;
      if (this.stopping) return;
      r.crashes++;
      out.write(`--- ${new Date().toISOString()} exited code=${code} signal=${signal}; restarting\n`);
      // What the harness's heal does: start the instance again. Exit 2 is
      // "could not start" — here, its port was taken by another program
      // between our probe and its bind: give it another.
      const again = async () => {
        if (code === 2) r.listen = `127.0.0.1:${await freePort()}`;
        if (!this.stopping) this.spawn(r);
      };
      setTimeout(() => void again(), 300);
    });
  }

  private async waitHealthy(r: Running): Promise<void> {
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(`http://${r.listen}/healthz`, { signal: AbortSignal.timeout(1000) });
        if (res.ok) return;
      } catch {
        /* not yet */
      }
      await sleep(100);
    }
    throw new Error(`${r.spec.name} not healthy within 120s (log in ${this.opts.dir})`);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.instances.map(
        (r) =>
          new Promise<void>((res) => {
            const p = r.proc;
            if (p === undefined || p.exitCode !== null || p.signalCode !== null) return res();
            const t = setTimeout(() => p.kill('SIGKILL'), 5000);
            p.once('exit', () => {
              clearTimeout(t);
              res();
            });
            p.kill('SIGTERM');
          }),
      ),
    );
  }

  /**
   * Kills one instance (the harness's crash-at-a-random-time fault); it
   * restarts. An instance still starting is left alone: on a loaded machine
   * a Node process can take tens of seconds to become healthy, and killing
   * it again and again tests the machine, not the target.
   */
  kill(name: string): void {
    const r = this.instances.find((i) => i.spec.name === name);
    if (r?.up) r.proc?.kill('SIGKILL');
  }
}
