// The single place where planted bugs are switched on (SAGACHAOS_MUTANT).
// Code that can carry a bug asks isMutant(name) at exactly one spot, so each
// planted bug is a small, reviewable deviation from the correct path.
// MUTANTS.md says which checker must catch each and under what faults.

export const mutants = {
  'double-compensation':
    'flights compensates on every failure event it sees (PaymentDeclined and PaymentCancelled as well as HotelCancelled), each cancellation keyed by the event that triggered it, without looking at the booking: one declined payment cancels the flight twice, the first time before the hotel',
  'no-inbox':
    'flights trusts exactly-once delivery: no inbox, and every TripRequested it receives is a new booking with its own booking reference, so a redelivered request books a second flight',
  'refund-after-pivot':
    'payments treats a TripTimedOut that arrives after the charge as a failure: it refunds the charge and answers PaymentCancelled, so the trip is compensated after its pivot',
  'cross-topic-order':
    'hotels answers a PaymentCancelled for a trip it has not seen yet with HotelCancelled but keeps no tombstone, so the FlightBooked that arrives later on the other topic books a hotel for a trip that is being aborted',
  'unordered-relay':
    'relays lock outbox rows with SKIP LOCKED but take no per-trip lock, so two relays can publish one trip\'s events out of order',
  'mark-before-ack':
    'the relay marks rows published and commits before the broker acknowledged them; a crash or a failed produce loses them',
  'no-provider-key':
    'payments charges without an Idempotency-Key, so a retry after an ambiguous answer charges again',
  'no-step-timeout':
    'nothing times a step out: trips never gives up on a step and calls to providers wait for an answer however long it takes',
} as const;

export type MutantName = keyof typeof mutants;

let current: MutantName | undefined;

export class UnknownMutantError extends Error {
  override name = 'UnknownMutantError';
}

/** Validates and switches on the named mutant ("" for none). */
export function setMutant(name: string): void {
  const n = name.trim();
  if (n === '') {
    current = undefined;
    return;
  }
  if (!(n in mutants)) {
    throw new UnknownMutantError(`unknown mutant ${JSON.stringify(n)} (known: ${Object.keys(mutants).sort().join(', ')})`);
  }
  current = n as MutantName;
}

export function isMutant(name: MutantName): boolean {
  return current === name;
}

export function currentMutant(): string {
  return current ?? '';
}
