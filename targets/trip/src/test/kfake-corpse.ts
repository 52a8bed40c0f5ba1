// kafkajs against kfake: a member SIGKILLed while its JoinGroup waits can
// stay in the group for good, holding its partitions (README.md, "kafkajs
// against kfake"). This reproduces it and shows the consumer's reaper
// recovering: member A (the consumer under test) is made slow to rejoin,
// member B with A's client id (a "previous incarnation") joins and is
// killed while its JoinGroup waits for A; then one record per partition is
// produced and A must receive all of them.
//
// `node dist/test/kfake-corpse.js raw|reaper [trials]`: raw uses a bare
// kafkajs consumer for A (no reaper), reaper uses runConsumer.

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { runConsumer } from '../consumer';
import { newLogger } from '../log';
import { startInfra } from './infra';

export interface TrialResult {
  corpseSeen: boolean;
  received: number;
  want: number;
}

export async function trial(brokers: string, n: number, mode: 'raw' | 'reaper'): Promise<TrialResult> {
  const kafka = new Kafka({ clientId: 'corpse-test', brokers: [brokers], logLevel: logLevel.NOTHING });
  const topic = `corpse-${n}`;
  const group = `g-corpse-${n}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true });
  const producer = kafka.producer();
  await producer.connect();
  const send = (partition: number, value: string) =>
    producer.send({ topic, messages: [{ partition, key: `t-${partition}`, value: JSON.stringify({ trip_id: `t-${partition}`, value }), headers: { event_id: `ev-${value}`, aggregate_id: `t-${partition}`, seq: '1', type: 'Probe', source: 'test' } }] });
  const got = new Set<string>();
  let slow = true;
  const ac = new AbortController();
  const clientId = `inst-${n}`;
  let stopA: () => Promise<void>;
  if (mode === 'reaper') {
    const run = runConsumer({
      kafka: new Kafka({ clientId, brokers: [brokers], logLevel: logLevel.NOTHING }),
      group,
      clientId,
      topics: [topic],
      types: new Set(['Probe']),
      sessionTimeoutMs: 12000,
      handler: async (e) => {
        if (slow && e.payload.trip_id === 't-0') {
          slow = false;
          await sleep(9000); // A is busy: the rebalance B starts waits for it
        }
        got.add(String((e.payload as unknown as { value: string }).value));
      },
      afterCommitFailpoint: 'trips.after-commit',
      log: newLogger({ test: 'corpse' }, 'error'),
      signal: ac.signal,
    });
    stopA = async () => {
      ac.abort();
      await run;
    };
  } else {
    const a = new Kafka({ clientId, brokers: [brokers], logLevel: logLevel.NOTHING }).consumer({ groupId: group, sessionTimeout: 12000, rebalanceTimeout: 5000, heartbeatInterval: 300, maxWaitTimeInMs: 100 });
    await a.connect();
    await a.subscribe({ topic, fromBeginning: true });
    await a.run({
      eachMessage: async ({ message }) => {
        const v = (JSON.parse(message.value!.toString()) as { value: string }).value;
        if (slow && v === 'slow') {
          slow = false;
          await sleep(9000);
        }
        got.add(v);
      },
    });
    stopA = () => a.disconnect();
  }
  await sleep(3000);
  await send(0, 'slow');
  await sleep(500);
  const b = spawn(process.execPath, [join(__dirname, 'corpse-member.js'), brokers, group, clientId, topic], { stdio: ['ignore', 'pipe', 'ignore'] });
  // Kill B once its second JoinGroup (the one with its member id, which the
  // broker parks until A rejoins) has been sent.
  await new Promise<void>((resolve) => {
    let joins = 0;
    const t = setTimeout(resolve, 6000);
    b.stdout!.on('data', (d: Buffer) => {
      joins += d.toString().split('join-sent').length - 1;
      if (joins >= 2) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  await sleep(300);
  b.kill('SIGKILL');
  await sleep(12_000); // past B's 8 s session: a real broker would have dropped it
  const { groups } = await admin.describeGroups([group]);
  const corpseSeen = (groups[0]?.members ?? []).length > 1;
  for (let p = 0; p < 4; p++) await send(p, `after-${p}`);
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && [0, 1, 2, 3].some((p) => !got.has(`after-${p}`))) await sleep(200);
  const received = [0, 1, 2, 3].filter((p) => got.has(`after-${p}`)).length;
  await stopA();
  await producer.disconnect();
  await admin.disconnect();
  return { corpseSeen, received, want: 4 };
}

if (require.main === module) {
  const mode = (process.argv[2] ?? 'raw') as 'raw' | 'reaper';
  const trials = Number(process.argv[3] ?? '4');
  void (async () => {
    const infra = await startInfra('corpse');
    try {
      for (let n = 0; n < trials; n++) console.log(JSON.stringify({ mode, trial: n, ...(await trial(infra.kafka, n, mode)) }));
    } finally {
      await infra.close();
    }
    process.exit(0);
  })();
}
