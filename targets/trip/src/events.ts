// The events of the trip saga. Choreography: no service commands another;
// each publishes what it did on its own topic and reacts to what others did.
//
//   trips     TripRequested ─► flights books the flight
//   flights   FlightBooked  ─► hotels books the hotel
//   hotels    HotelBooked   ─► payments charges the card (the pivot)
//   payments  PaymentCharged ─► tickets issues tickets, e-mails the itinerary
//   tickets   TicketsIssued ─► trips: BOOKED
//
// Failures before the pivot unwind in reverse order, each compensation
// triggered by the one after it:
//   PaymentDeclined | PaymentCancelled ─► hotels cancels ─► HotelCancelled
//   HotelBookingFailed | HotelCancelled ─► flights cancels ─► FlightCancelled
//   FlightBookingFailed | FlightCancelled ─► trips: ABORTED
// A step deadline in trips starts the unwinding at the pivot (TripTimedOut:
// payments decides atomically whether the charge happened); after the pivot
// the deadline only asks again (TicketsRequested).
//
// Every event carries the whole itinerary (event-carried state), so a
// service never needs another service's database or an earlier event.

// The Kafka topic of each service, as the harness names it for this run
// (TOPIC_TRIPS={{topic:trips}} …: against real brokers a run prefixes its
// topics); the manifest's names when unset (the embedded broker, tests).
const topicEnv = (name: string, fallback: string): string => (process.env[name] ?? '').trim() || fallback;

export const Topic = {
  trips: topicEnv('TOPIC_TRIPS', 'trips'),
  flights: topicEnv('TOPIC_FLIGHTS', 'flights'),
  hotels: topicEnv('TOPIC_HOTELS', 'hotels'),
  payments: topicEnv('TOPIC_PAYMENTS', 'payments'),
  tickets: topicEnv('TOPIC_TICKETS', 'tickets'),
} as const;

export const Ev = {
  TripRequested: 'TripRequested',
  TripTimedOut: 'TripTimedOut',
  TicketsRequested: 'TicketsRequested',
  TripBooked: 'TripBooked',
  TripAborted: 'TripAborted',
  FlightBooked: 'FlightBooked',
  FlightBookingFailed: 'FlightBookingFailed',
  FlightCancelled: 'FlightCancelled',
  HotelBooked: 'HotelBooked',
  HotelBookingFailed: 'HotelBookingFailed',
  HotelCancelled: 'HotelCancelled',
  PaymentCharged: 'PaymentCharged',
  PaymentDeclined: 'PaymentDeclined',
  PaymentCancelled: 'PaymentCancelled',
  TicketsIssued: 'TicketsIssued',
} as const;

export type EventType = (typeof Ev)[keyof typeof Ev];

/** What a customer asked for; copied into every event of the trip. */
export interface Itinerary {
  trip_id: string;
  customer: string;
  flight: string;
  hotel: string;
  nights: number;
  card: string;
  total: number;
  /** Passed to the airline as its outcome field (the workload's lever). */
  flight_outcome: string;
  /** Passed to the hotel chain as its outcome field. */
  hotel_outcome: string;
}

/** The JSON value of every record: the itinerary plus what the step learned. */
export interface Payload extends Itinerary {
  flight_booking?: string;
  hotel_booking?: string;
  charge_id?: string;
  reason?: string;
  /** Set on a cancellation event when nothing had been booked (a tombstone). */
  nothing_booked?: boolean;
}

/** Kafka record headers (models/envelope.go): the envelope of every message. */
export const Header = {
  eventId: 'event_id',
  aggregateId: 'aggregate_id',
  seq: 'seq',
  type: 'type',
  source: 'source',
} as const;
