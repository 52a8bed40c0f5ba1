package models

// Process names and op functions that the parts of the loop write and the
// checkers read. A new writer uses these names; a checker never matches a
// string that is not declared here or in a SagaSpec.

// Process names (Op.Proc). Clients are "client-<n>"; world services are
// ProcWorldPrefix + service name.
const (
	ProcHarness     = "harness"
	ProcNemesis     = "nemesis"
	ProcObserver    = "observer"
	ProcClientPfx   = "client-"
	ProcWorldPrefix = "world/"
	ProcGateway     = "world/gateway"
	ProcCarrier     = "world/carrier"
	ProcMailer      = "world/mailer"
)

// Client operations (Invoke, then Ok / Fail / Info).
const (
	// FPlaceOrder: POST /orders. Invoke value: PlaceOrder. Ok value:
	// PlaceOrderReply (Order set on the op). Fail: the server definitely
	// refused (a 4xx with a code). Info: the outcome is unknown (timeout,
	// connection reset, 5xx): the order may or may not exist.
	FPlaceOrder = "place-order"
)

// World effects (Type Effect), recorded by the world service at the moment
// the effect is applied (or, for a Replay, answered from the idempotency
// store).
const (
	FCharge   = "charge"   // value: ChargeEffect
	FRefund   = "refund"   // value: RefundEffect
	FShipment = "shipment" // value: ShipmentEffect
	FEmail    = "email"    // value: EmailEffect
)

// Observer state functions (Type State), written after quiescence.
const (
	FOrderState     = "order"           // Order set; value: OrderState
	FStockState     = "stock"           // value: StockState
	FOutboxRow      = "outbox-row"      // Order = aggregate; value: OutboxRow
	FOutboxSnapshot = "outbox-snapshot" // value: OutboxSnapshot, one per database after its rows
	FApplied        = "applied"         // Order = aggregate; value: Applied
	FKafkaSnapshot  = "kafka-snapshot"  // value: KafkaSnapshot, after every event op of the run
	FQuiesce        = "quiesce"         // value: Quiesce
	// Closing snapshots of the other observations (value: Snapshot): a
	// missing one, or one with Error, means the observation is not evidence.
	FOrdersSnapshot  = "orders-snapshot"
	FStockSnapshot   = "stock-snapshot"
	FAppliedSnapshot = "applied-snapshot"
)

// Harness info ops (Proc ProcHarness, Type Info).
const (
	FRunStart    = "run-start"     // value: RunInfo
	FInitStock   = "initial-stock" // value: InitialStock
	FPhase       = "phase"         // value: Phase
	FInterrupted = "interrupted"   // value: {"reason": "..."}
	FRunEnd      = "run-end"       // value: {"elapsed_ms": n}
)

// Item is one line of an order.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// PlaceOrder is the invoke value of FPlaceOrder: the request the client sent.
type PlaceOrder struct {
	Key      string `json:"key"` // Idempotency-Key header
	Customer string `json:"customer"`
	Items    []Item `json:"items"`
	Card     string `json:"card"`
	Total    int64  `json:"total"` // minor units
	// Attempt counts the client's tries with this key (1 = first).
	Attempt int `json:"attempt,omitempty"`
}

// PlaceOrderReply is the ok value of FPlaceOrder.
type PlaceOrderReply struct {
	Key    string `json:"key"`
	Status int    `json:"status"` // HTTP status
	Order  string `json:"order"`
	// Replayed is true when the server answered from its idempotency store.
	Replayed bool `json:"replayed,omitempty"`
}

// ClientFailure is the fail / info value of a client op.
type ClientFailure struct {
	Key    string `json:"key,omitempty"`
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error"`
}

// ChargeEffect is one call to the payment gateway's charge endpoint.
type ChargeEffect struct {
	ChargeID       string `json:"charge_id,omitempty"`
	Amount         int64  `json:"amount"`
	Card           string `json:"card"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Status         string `json:"status"` // "succeeded" or "declined"
	// Replay: answered from the idempotency store; no new money moved.
	Replay bool `json:"replay,omitempty"`
	// Ambiguous: the effect was applied but the caller was answered with a
	// failure ("500") or never answered ("hang").
	Ambiguous string `json:"ambiguous,omitempty"`
}

// Charge statuses.
const (
	ChargeSucceeded = "succeeded"
	ChargeDeclined  = "declined"
)

// RefundEffect is one call to the gateway's refund endpoint.
type RefundEffect struct {
	RefundID       string `json:"refund_id,omitempty"`
	ChargeID       string `json:"charge_id"`
	Amount         int64  `json:"amount"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Status         string `json:"status"` // "succeeded" or "rejected"
	Replay         bool   `json:"replay,omitempty"`
	Ambiguous      string `json:"ambiguous,omitempty"`
}

// ShipmentEffect is one shipment booked at the carrier.
type ShipmentEffect struct {
	ShipmentID     string `json:"shipment_id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Replay         bool   `json:"replay,omitempty"`
	Ambiguous      string `json:"ambiguous,omitempty"`
}

// EmailEffect is one e-mail accepted by the mailer.
type EmailEffect struct {
	EmailID        string `json:"email_id"`
	Kind           string `json:"kind"` // e.g. "confirmation", "cancellation"
	To             string `json:"to"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Replay         bool   `json:"replay,omitempty"`
	Ambiguous      string `json:"ambiguous,omitempty"`
}

// OrderState is the observer's final view of one order.
type OrderState struct {
	Status         string   `json:"status"`
	IdempotencyKey string   `json:"idempotency_key,omitempty"`
	Customer       string   `json:"customer,omitempty"`
	Items          []Item   `json:"items,omitempty"`
	Card           string   `json:"card,omitempty"`
	Total          int64    `json:"total,omitempty"`
	Trail          []string `json:"trail,omitempty"` // the saga's step trail, as the target reports it
}

// StockState is the observer's final view of one SKU.
type StockState struct {
	SKU       string `json:"sku"`
	Available int64  `json:"available"`
	// Reserved is stock held by sagas (semantic lock) or committed to
	// approved orders, as the target counts it.
	Reserved int64 `json:"reserved"`
}

// InitialStock is what the harness seeded before the workload.
type InitialStock struct {
	Stock map[string]int64 `json:"stock"`
}

// OutboxRow is one row of a service's outbox as observed after quiescence.
type OutboxRow struct {
	DB      string `json:"db"`
	ID      int64  `json:"id"`
	EventID string `json:"event_id"`
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	Topic   string `json:"topic,omitempty"`
	// Published: the row was already marked published when the outbox was
	// read before the Kafka log was read (the observer reads it twice), so
	// the record must be in that log.
	Published bool `json:"published"`
}

// OutboxSnapshot closes one database's outbox rows. Complete means every row
// ever committed is still there (retention deleted nothing during the run),
// so the absence of a row is evidence.
type OutboxSnapshot struct {
	DB       string `json:"db"`
	Rows     int    `json:"rows"`
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// Snapshot closes an observation of the order list (DB empty), the stock
// query or an applied query; it has the shape of OutboxSnapshot.
type Snapshot struct {
	DB       string `json:"db,omitempty"`
	Rows     int    `json:"rows"`
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// Applied is one message a consumer applied (its processed-message record).
// Position orders the applications of one consumer.
type Applied struct {
	Consumer string `json:"consumer"`
	EventID  string `json:"event_id"`
	Source   string `json:"source,omitempty"`
	Type     string `json:"type,omitempty"`
	Seq      int64  `json:"seq"`
	Position int64  `json:"position"`
}

// KafkaSnapshot closes the observer's read of the broker: every record of
// Topics from offset 0 to the high watermark has been written as an Event op.
type KafkaSnapshot struct {
	Topics   []string `json:"topics"`
	Records  int      `json:"records"`
	Complete bool     `json:"complete"`
	Error    string   `json:"error,omitempty"`
}

// Quiesce records how the wait for in-flight sagas ended.
type Quiesce struct {
	AllTerminal bool     `json:"all_terminal"`
	Pending     []string `json:"pending,omitempty"`
	WaitedMS    int64    `json:"waited_ms"`
	DeadlineMS  int64    `json:"deadline_ms"`
	// Error is set when the target's API never answered: then Pending says
	// nothing and the wait is not evidence.
	Error string `json:"error,omitempty"`

	// The stuck-saga watch (absent in older histories). StepTimeoutMS is
	// the saga's declared step timeout and StuckAfterMS = k × it: a pending
	// saga that did not change for that long after heal, with every
	// component healthy, is proven stuck. The watch ran from FromT; CheckedT
	// is its last complete check (history times, as Op.T). EarlyStop: the
	// wait ended before the deadline because every pending saga was proven
	// stuck. Sagas are the pending sagas at the end.
	StepTimeoutMS int64       `json:"step_timeout_ms,omitempty"`
	StuckAfterMS  int64       `json:"stuck_after_ms,omitempty"`
	FromT         int64       `json:"from_t,omitempty"`
	CheckedT      int64       `json:"checked_t,omitempty"`
	EarlyStop     bool        `json:"early_stop,omitempty"`
	Sagas         []SagaWatch `json:"sagas,omitempty"`
}

// RunInfo describes a run (the FRunStart value; also in verdict.json).
type RunInfo struct {
	ID       string `json:"id,omitempty"`
	Target   string `json:"target"`
	Mutant   string `json:"mutant,omitempty"`
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	// Repro is the one command line that replays this run.
	Repro string `json:"repro,omitempty"`
}

// Phase marks a step of the loop (env-up, target-up, workload, heal,
// quiesce, observe, check).
type Phase struct {
	Name string `json:"name"`
}

// FaultRecord is the value of every nemesis op. Op.F is the fault kind
// (e.g. "link-down", "kill", "pause", "db-crash"). Phase is "start" or
// "end" for faults with a window, "instant" for one-shot ones.
type FaultRecord struct {
	ID     string            `json:"id"`
	Kind   string            `json:"kind"`
	Phase  string            `json:"phase"`
	Target string            `json:"target,omitempty"` // link or component
	Detail map[string]string `json:"detail,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// Fault phases.
const (
	PhaseStart   = "start"
	PhaseEnd     = "end"
	PhaseInstant = "instant"
	// PhaseFired: an armed fault (a failpoint) took effect; Detail says
	// where (instance, hit) and which component op logged it.
	PhaseFired = "fired"
)
