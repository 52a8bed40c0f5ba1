// The planted bugs, each run on a scenario that reaches it, with the
// checker that must catch it; and the same scenario without the bug, which
// must be valid (a scenario that fails the correct target proves nothing).
// `node dist/test/mutants.js [name…]` prints one line per run.

import { runScenario, type ScenarioOptions } from './scenario';

interface Case {
  mutant: string;
  expect: string[];
  scenario: Omit<ScenarioOptions, 'name' | 'mutant'>;
}

export const cases: Case[] = [
  // Declined cards: hotels cancels, and flights (the bug) cancels on the
  // decline too, and again on HotelCancelled.
  { mutant: 'double-compensation', expect: ['no-double-effect', 'compensation-order'], scenario: { trips: 30, clients: 3, seed: 11, declineRate: 0.3, ambiguousRate: 0, stepTimeout: '10s' } },
  // flights crashes after committing an applied request and before its
  // offset commit: the restarted consumer receives it again.
  { mutant: 'no-inbox', expect: ['no-double-effect'], scenario: { trips: 30, clients: 3, seed: 12, failpoints: { flights: 'flights.after-commit=crash@4' } } },
  // The first charge stalls past the step deadline while holding the
  // charge: TripTimedOut reaches payments after the pivot.
  { mutant: 'refund-after-pivot', expect: ['pivot'], scenario: { trips: 20, clients: 2, seed: 13, declineRate: 0, ambiguousRate: 0, stepTimeout: '1500ms', failpoints: { payments: 'payments.after-charge=sleep(3s)@2' } } },
  // A flight booking stalls past the deadline: PaymentCancelled reaches
  // hotels before the trip's FlightBooked.
  { mutant: 'cross-topic-order', expect: ['compensation-order'], scenario: { trips: 20, clients: 2, seed: 14, declineRate: 0, ambiguousRate: 0, stepTimeout: '1500ms', failpoints: { flights: 'flights.after-book=sleep(3s)@2' } } },
  // One relay stalls holding a batch; the other publishes the same trips' later rows.
  // (longer than the step timeout: trips writes TripTimedOut while its
  // TripRequested is still held, and the other relay takes it).
  { mutant: 'unordered-relay', expect: ['per-aggregate-order'], scenario: { trips: 40, clients: 4, seed: 15, stepTimeout: '1500ms', failpoints: { 'relay-1': 'relay.after-select=sleep(4s)@2', 'relay-2': 'relay.after-select=sleep(4s)@6' } } },
  // The relay crashes between its committed mark and the produce.
  { mutant: 'mark-before-ack', expect: ['no-lost-event'], scenario: { trips: 30, clients: 3, seed: 16, failpoints: { 'relay-1': 'relay.after-publish=crash@3', 'relay-2': 'relay.after-publish=crash@4' } } },
  // Ambiguous charge answers, retried without a key.
  { mutant: 'no-provider-key', expect: ['no-double-effect'], scenario: { trips: 30, clients: 3, seed: 17, declineRate: 0, ambiguousRate: 0.4 } },
  // A provider that never answers holds the trip forever.
  { mutant: 'no-step-timeout', expect: ['saga-terminates'], scenario: { trips: 20, clients: 2, seed: 18, declineRate: 0, ambiguousRate: 0.3, terminalDeadlineMs: 20_000 } },
];

async function main(names: string[]): Promise<number> {
  let bad = 0;
  for (const c of cases.filter((x) => names.length === 0 || names.includes(x.mutant))) {
    for (const mutant of [c.mutant, '']) {
      const r = await runScenario({ ...c.scenario, name: `${c.mutant}${mutant === '' ? '-control' : ''}`, mutant });
      const by = [...new Set(r.violations.map((v) => v.checker))].sort();
      const ok = mutant === '' ? by.length === 0 : c.expect.some((e) => by.includes(e));
      if (!ok) bad++;
      console.log(
        JSON.stringify({ mutant: mutant || `(none: ${c.mutant}'s scenario)`, ok, caughtBy: by, expected: mutant === '' ? [] : c.expect, statuses: r.statuses, crashes: r.crashes, first: r.violations.slice(0, 2), dir: r.dir }),
      );
    }
  }
  return bad;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (bad) => process.exit(bad === 0 ? 0 : 1),
    (e) => {
      console.error(e);
      process.exit(2);
    },
  );
}
