// Entry point: `node dist/main.js <service>` starts one process of the trip
// target (trips, flights, hotels, payments, tickets, relay), like the
// reference's `reftarget <service>`. `--list-failpoints` prints the failpoint
// catalogue as JSON, `--list-mutants` the planted bugs.
//
// Exit codes: 2 for a bad configuration or an unknown mutant (the harness
// reports "the target could not start", never a verdict); 1 for a failure at
// run time.

import type { Server } from 'node:http';
import type { Pool } from 'pg';
import { ConfigError, env, envDuration, envInt, instanceName } from './config';
import { runConsumer } from './consumer';
import { migrate, newPool } from './db';
import { Ev, Topic } from './events';
import { catalogue, setupFailpoints } from './failpoints';
import { listen, newServer, type Route } from './http';
import { newKafka } from './kafka';
import { errMsg, newLogger, type Logger } from './log';
import { currentMutant, mutants, setMutant, UnknownMutantError } from './mutants';
import { outboxSchema } from './outbox';
import { parseDatabases, runRelay } from './relay';
import { runWorker } from './worker';
import { Provider } from './world';
import { BookingService, bookingSchema, flightStep, hotelStep } from './services/booking';
import { PaymentsService, paymentsSchema } from './services/payments';
import { TicketsService, ticketsSchema } from './services/tickets';
import { TripsService, tripsSchema, tripsTypes } from './services/trips';

const services = ['trips', 'flights', 'hotels', 'payments', 'tickets', 'relay'] as const;
type ServiceName = (typeof services)[number];

const usage = `usage: node dist/main.js <${services.join('|')}> | --list-failpoints | --list-mutants`;

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? '';
  if (cmd === '--list-failpoints') {
    process.stdout.write(JSON.stringify(catalogue, null, 2) + '\n');
    return 0;
  }
  if (cmd === '--list-mutants') {
    process.stdout.write(JSON.stringify(Object.entries(mutants).map(([name, description]) => ({ name, description })), null, 2) + '\n');
    return 0;
  }
  if (!(services as readonly string[]).includes(cmd)) {
    process.stderr.write(`${usage}\n`);
    return 2;
  }
  const service = cmd as ServiceName;
  const instance = instanceName(service);
  const log = newLogger({ instance });
  try {
    setMutant(process.env.SAGACHAOS_MUTANT ?? '');
    setupFailpoints(process.env.SAGACHAOS_FAILPOINTS ?? '', process.env.SAGACHAOS_FAILPOINT_LOG ?? '', instance);
  } catch (e) {
    process.stderr.write(`${service}: ${errMsg(e)}\n`);
    return 2;
  }
  const ac = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => ac.abort());
  try {
    await run(service, instance, log, ac.signal);
    return 0;
  } catch (e) {
    if (e instanceof ConfigError || e instanceof UnknownMutantError) {
      process.stderr.write(`${service}: ${e.message}\n`);
      return 2;
    }
    log.error('fatal', { err: errMsg(e) });
    return 1;
  }
}

async function run(service: ServiceName, instance: string, log: Logger, signal: AbortSignal): Promise<void> {
  // Bind first: a second incarnation started while the first still runs
  // fails at once (exit 2) instead of working beside it.
  let ready = false;
  const routes: Array<[string, string, Route]> = [];
  const server: Server = newServer(routes, () => ready);
  const addr = env('LISTEN_ADDR');
  await listen(server, addr).catch((e) => {
    throw new ConfigError(`listen on LISTEN_ADDR ${addr}: ${errMsg(e)}`);
  });
  log.info('starting', { service, mutant: currentMutant() || undefined, listen: addr });
  const kafka = newKafka(env('KAFKA_BROKERS'), instance, log);
  const callTimeout = envDuration('CALL_TIMEOUT', 1000);
  const concurrency = envInt('WORKER_CONCURRENCY', 8);
  const tasks: Array<Promise<void>> = [];
  const pools: Pool[] = [];

  const consume = (group: string, topics: string[], types: ReadonlySet<string>, handler: Parameters<typeof runConsumer>[0]['handler']) =>
    tasks.push(runConsumer({ kafka, group, clientId: instance, topics, types, handler, afterCommitFailpoint: `${group}.after-commit`, log, signal }));

  if (service === 'relay') {
    const sources = [...parseDatabasesOrConfigError(env('RELAY_DATABASES'))].map(([name, url]) => {
      const pool = newPool(url, 4, log);
      pools.push(pool);
      return { name, pool };
    });
    // The relay only reads and updates the outbox; each service migrates its own schema.
    await Promise.all(sources.map((s) => migrate(s.pool, outboxSchema, log)));
    tasks.push(
      runRelay({
        sources,
        kafka,
        batch: envInt('RELAY_BATCH', 20),
        idleMs: envDuration('RELAY_IDLE', 20),
        retentionMs: envDuration('OUTBOX_RETENTION', 3_600_000),
        cleanupEveryMs: envDuration('OUTBOX_CLEANUP_EVERY', 60_000),
        log,
        signal,
      }),
    );
  } else {
    const pool = newPool(env('DATABASE_URL'), concurrency + 8, log);
    pools.push(pool);
    switch (service) {
      case 'trips': {
        await migrate(pool, outboxSchema + tripsSchema, log);
        const trips = new TripsService(pool, envDuration('STEP_TIMEOUT', 2000), log);
        routes.push(...trips.routes());
        consume('trips', [Topic.flights, Topic.hotels, Topic.payments, Topic.tickets], tripsTypes, (e) => trips.handle(e));
        tasks.push(trips.runTimers(signal, 100));
        break;
      }
      case 'flights':
      case 'hotels': {
        await migrate(pool, outboxSchema + bookingSchema, log);
        const step = service === 'flights' ? flightStep : hotelStep;
        const url = service === 'flights' ? env('AIRLINE_URL') : env('HOTEL_URL');
        const svc = new BookingService(step, pool, new Provider(url, callTimeout), log);
        const topics: string[] = service === 'flights' ? [Topic.trips, Topic.hotels] : [Topic.flights, Topic.payments];
        if (service === 'flights' && svc.types().has(Ev.PaymentDeclined)) topics.push(Topic.payments);
        consume(service, topics, svc.types(), (e) => svc.handle(e));
        tasks.push(runWorker(svc.worker(signal, concurrency)));
        break;
      }
      case 'payments': {
        await migrate(pool, outboxSchema + paymentsSchema, log);
        const svc = new PaymentsService(pool, new Provider(env('PAYMENTS_URL'), callTimeout), log);
        consume('payments', [Topic.hotels, Topic.trips], PaymentsService.types, (e) => svc.handle(e));
        tasks.push(runWorker(svc.worker(signal, concurrency)));
        break;
      }
      case 'tickets': {
        await migrate(pool, outboxSchema + ticketsSchema, log);
        const svc = new TicketsService(pool, new Provider(env('MAILER_URL'), callTimeout), log);
        consume('tickets', [Topic.payments, Topic.trips], TicketsService.types, (e) => svc.handle(e));
        tasks.push(runWorker(svc.worker(signal, concurrency)));
        break;
      }
    }
  }
  ready = true;
  log.info('ready', { service, startup_ms: Math.round(process.uptime() * 1000) });
  await Promise.all(tasks);
  server.close();
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
}

function parseDatabasesOrConfigError(s: string): Map<string, string> {
  try {
    return parseDatabases(s);
  } catch (e) {
    throw new ConfigError(errMsg(e));
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`fatal: ${errMsg(e)}\n`);
    process.exit(1);
  },
);
