// Real infrastructure for the end-to-end tests: PostgreSQL and Kafka from
// `sagachaos env up` (the harness's own embedded environment: local
// PostgreSQL binaries and franz-go's kfake), started fresh per test from the
// repository root with `go run`. Set TRIP_TEST_PG (a server URL, e.g.
// postgres://postgres@127.0.0.1:5432) and TRIP_TEST_KAFKA (brokers) to use
// servers of your own instead: databases get a per-test prefix, but topic
// names are the target's own, so such a broker must be fresh for each test.

import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { Kafka, logLevel } from 'kafkajs';

export const repoRoot = resolve(__dirname, '../../../..');
export const services = ['trips', 'flights', 'hotels', 'payments', 'tickets'] as const;
export const topics = ['trips', 'flights', 'hotels', 'payments', 'tickets'];

export interface Infra {
  pgBase: string; // postgres://postgres@127.0.0.1:PORT
  kafka: string;
  dbURL(service: string): string;
  close(): Promise<void>;
}

export async function startInfra(tag: string): Promise<Infra> {
  let child: ChildProcess | undefined;
  let pgBase = process.env.TRIP_TEST_PG ?? '';
  let kafka = process.env.TRIP_TEST_KAFKA ?? '';
  if (pgBase === '' || kafka === '') {
    child = spawn('go', ['run', './cmd/sagachaos', 'env', 'up'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out = await new Promise<string>((res, rej) => {
      let buf = '';
      const timer = setTimeout(() => rej(new Error(`sagachaos env up did not come up in 120s (is Go on PATH? run from the repository): ${buf}`)), 120_000);
      const onData = (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('up; Ctrl-C')) {
          clearTimeout(timer);
          res(buf);
        }
      };
      child!.stdout!.on('data', onData);
      child!.stderr!.on('data', (d: Buffer) => (buf += d.toString()));
      child!.on('exit', (code) => rej(new Error(`sagachaos env up exited ${code}: ${buf}`)));
    });
    const pg = /^postgres\s+\S+\s+(127\.0\.0\.1:\d+)/m.exec(out);
    const kf = /^kafka\s+\S+\s+(127\.0\.0\.1:\d+)/m.exec(out);
    if (pg === null || kf === null) throw new Error(`cannot read addresses from env up: ${out}`);
    pgBase = `postgres://postgres@${pg[1]}`;
    kafka = kf[1]!;
  }
  const dbName = (s: string) => `${tag}_${s}`;
  const admin = new Client({ connectionString: `${pgBase}/postgres?sslmode=disable` });
  await admin.connect();
  for (const s of services) {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName(s)}`);
    await admin.query(`CREATE DATABASE ${dbName(s)}`);
  }
  await admin.end();
  const k = new Kafka({ clientId: 'trip-test', brokers: [kafka], logLevel: logLevel.NOTHING });
  const ka = k.admin();
  await ka.connect();
  await ka.createTopics({ topics: topics.map((t) => ({ topic: t, numPartitions: 4 })), waitForLeaders: true });
  await ka.disconnect();
  return {
    pgBase,
    kafka,
    dbURL: (s) => `${pgBase}/${dbName(s)}?sslmode=disable`,
    close: async () => {
      if (child?.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGINT');
        } catch {
          /* gone */
        }
        await new Promise((r) => {
          const t = setTimeout(() => {
            try {
              process.kill(-child!.pid!, 'SIGKILL');
            } catch {
              /* gone */
            }
            r(undefined);
          }, 10_000);
          child!.on('exit', () => {
            clearTimeout(t);
            r(undefined);
          });
        });
      }
    },
  };
}
