package models

import "strings"

// StepKind classifies a saga step (Garcia-Molina & Salem; the seeds' third
// article): compensatable steps can be undone, the pivot is the point of no
// return, retriable steps after it are retried until they succeed.
type StepKind string

// Step kinds.
const (
	Compensatable StepKind = "compensatable"
	Pivot         StepKind = "pivot"
	Retriable     StepKind = "retriable"
)

// EffectSpec names a world effect: ops with Proc and F, whose value has each
// Match field (a top-level JSON string field) equal to the given value.
// Replays (value.replay == true) are never counted as effects.
//
// A manifest names the effect by Provider and Action (the world provider
// and the action's name, docs/target-contract.md); Normalize fills Proc
// ("world/<provider>") and F (the action) from them, and the other way
// round, so the spec a history records carries both.
type EffectSpec struct {
	Provider string            `json:"provider,omitempty"`
	Action   string            `json:"action,omitempty"`
	Proc     string            `json:"proc,omitempty"`
	F        string            `json:"f,omitempty"`
	Match    map[string]string `json:"match,omitempty"`
}

// Normalize fills Proc and F from Provider and Action, and Provider and
// Action from a Proc of a world provider and F.
func (e *EffectSpec) Normalize() {
	if e == nil {
		return
	}
	if e.Proc == "" && e.Provider != "" {
		e.Proc = ProcWorldPrefix + e.Provider
	}
	if e.F == "" {
		e.F = e.Action
	}
	if e.Provider == "" && strings.HasPrefix(e.Proc, ProcWorldPrefix) {
		e.Provider = strings.TrimPrefix(e.Proc, ProcWorldPrefix)
	}
	if e.Action == "" {
		e.Action = e.F
	}
}

// Action is what a step or its compensation does, as seen from outside: a
// world effect and/or an event type in the broker log.
type Action struct {
	Name   string      `json:"name"`
	Effect *EffectSpec `json:"effect,omitempty"`
	// Event is the event type the service publishes when the action is done.
	Event string `json:"event,omitempty"`
}

// Step is one step of a saga.
type Step struct {
	Action
	Service string   `json:"service"`
	Kind    StepKind `json:"kind"`
	// Compensation undoes a compensatable step. For a pivot it names the
	// action that would undo it (e.g. a refund), which must never happen.
	Compensation *Action `json:"compensation,omitempty"`
}

// SagaSpec describes a saga as data: its steps in order and its terminal
// states. Checkers read the spec, never hard-coded step names.
type SagaSpec struct {
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
	// Success and Failure are the two terminal order statuses; Pending is
	// the status of a saga in flight (the semantic lock).
	Success string `json:"success"`
	Failure string `json:"failure"`
	Pending string `json:"pending"`
	// SuccessEvent and FailureEvent are the events the saga publishes when
	// it reaches Success or Failure (empty: it announces nothing). A saga
	// that ended there must have its event in the log (saga-terminates,
	// kind missing-terminal-event).
	SuccessEvent string `json:"success_event,omitempty"`
	FailureEvent string `json:"failure_event,omitempty"`
	// StepTimeoutMS is the saga owner's promise of liveness: it acts on
	// every pending saga within this many milliseconds — it moves it on,
	// retries the step or compensates — and each action is visible as a
	// new outbox row of the saga's aggregate or a change of its status or
	// trail. 0: no promise (a stuck saga is then proven only when the
	// quiescence deadline passes).
	StepTimeoutMS int64 `json:"step_timeout_ms,omitempty"`

	// Orchestrator is the service that drives the saga (it keeps the saga
	// state and sends the commands); empty: a choreographed saga, in which
	// each service reacts to the others' events and nobody orchestrates.
	Orchestrator string `json:"orchestrator,omitempty"`
	// StatusService is the service whose API reports a saga's status (the
	// workload's read and list answer it), orchestrated or not.
	StatusService string `json:"status_service,omitempty"`
	// StatusFrom says where the harness reads a saga's status: StatusFromAPI
	// (the default: the workload's list, or read) or StatusFromEvents (the
	// target reports no status; a saga is Success once an outbox row of its
	// aggregate has type SuccessEvent, Failure once one has FailureEvent,
	// Pending before).
	StatusFrom string `json:"status_from,omitempty"`
}

// Where a saga's status comes from (SagaSpec.StatusFrom).
const (
	StatusFromAPI    = "api"
	StatusFromEvents = "events"
)

// Normalize fills the derived names of every effect (EffectSpec.Normalize).
func (s *SagaSpec) Normalize() {
	for i := range s.Steps {
		s.Steps[i].Effect.Normalize()
		if c := s.Steps[i].Compensation; c != nil {
			c.Effect.Normalize()
		}
	}
}

// Choreographed reports whether no service orchestrates the saga.
func (s SagaSpec) Choreographed() bool { return s.Orchestrator == "" }

// TerminalEvent returns the event the saga publishes on reaching status
// ("" when the spec declares none or status is not terminal).
func (s SagaSpec) TerminalEvent(status string) string {
	switch status {
	case s.Success:
		return s.SuccessEvent
	case s.Failure:
		return s.FailureEvent
	}
	return ""
}

// PivotIndex returns the index of the pivot step, or -1.
func (s SagaSpec) PivotIndex() int {
	for i, st := range s.Steps {
		if st.Kind == Pivot {
			return i
		}
	}
	return -1
}

// Terminal reports whether status ends the saga.
func (s SagaSpec) Terminal(status string) bool { return status == s.Success || status == s.Failure }

// Order statuses of the order saga.
const (
	StatusPending   = "PENDING"
	StatusApproved  = "APPROVED"
	StatusCancelled = "CANCELLED"
)

// OrderSaga is the reference domain of DESIGN §4: T1 create order, T2
// reserve stock, T3 charge (pivot), T4 schedule delivery, T5 approve and
// e-mail.
//
// It is the order domain's declaration (targets/domains/order.json, which a
// test keeps equal to it) as Go, for histories that predate the target op's
// saga: checkers judge those as order sagas.
var OrderSaga = SagaSpec{
	Name:          "order",
	Orchestrator:  "orders",
	StatusService: "orders",
	Success:       StatusApproved,
	Failure:       StatusCancelled,
	Pending:       StatusPending,
	SuccessEvent:  "OrderApproved",
	FailureEvent:  "OrderCancelled",
	StepTimeoutMS: 2000, // the manifest's STEP_TIMEOUT of the orders process
	Steps: []Step{
		{
			Action:       Action{Name: "create-order", Event: "OrderCreated"},
			Service:      "orders",
			Kind:         Compensatable,
			Compensation: &Action{Name: "cancel-order", Event: "OrderCancelled"},
		},
		{
			Action:       Action{Name: "reserve-stock", Event: "StockReserved"},
			Service:      "inventory",
			Kind:         Compensatable,
			Compensation: &Action{Name: "release-stock", Event: "StockReleased"},
		},
		{
			Action: Action{Name: "charge", Event: "PaymentCharged",
				Effect: &EffectSpec{Proc: ProcGateway, F: FCharge, Match: map[string]string{"status": ChargeSucceeded}}},
			Service: "payment",
			Kind:    Pivot,
			Compensation: &Action{Name: "refund", Event: "PaymentRefunded",
				Effect: &EffectSpec{Proc: ProcGateway, F: FRefund, Match: map[string]string{"status": "succeeded"}}},
		},
		{
			Action: Action{Name: "schedule-delivery", Event: "DeliveryScheduled",
				Effect: &EffectSpec{Proc: ProcCarrier, F: FShipment}},
			Service: "delivery",
			Kind:    Retriable,
		},
		{
			Action: Action{Name: "approve", Event: "OrderApproved",
				Effect: &EffectSpec{Proc: ProcMailer, F: FEmail, Match: map[string]string{"kind": "confirmation"}}},
			Service: "orders",
			Kind:    Retriable,
		},
	},
}
