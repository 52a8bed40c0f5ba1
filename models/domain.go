package models

import (
	"encoding/json"
	"strings"
)

// This file is the vocabulary of a target's domain as data: the world
// providers it calls, the workload that starts its sagas, and the resources
// it must conserve. A target's manifest declares them (docs/target-contract.md,
// docs/manifest.schema.json); the harness serves the world, drives the
// workload and observes the resources from them, and records in the target
// op (TargetDecl) what the checkers need. The order domain is one such
// declaration (targets/domains/order.json).

// Ops of the domain (the rest of the vocabulary is in vocab.go).
const (
	// FStartSaga is the default op function of a client's saga start
	// (Workload.Op names another; the order domain's is FPlaceOrder).
	// Invoke value: StartSaga; ok value: PlaceOrderReply (Order is the
	// saga's id); fail and info: ClientFailure.
	FStartSaga = "start-saga"
	// FResourceInit (Proc ProcHarness, Type Info): what the harness gave a
	// counted resource before the workload. Value: ResourceInit.
	FResourceInit = "initial-resource"
	// FResourceState (Proc ProcObserver, Type State): one key of a counted
	// resource after quiescence. Value: ResourceState. Closed per resource
	// by FResourceSnapshot (value Snapshot, DB = the resource's name).
	FResourceState    = "resource"
	FResourceSnapshot = "resource-snapshot"
	// SnapResourcePfx + resource name is the closing snapshot's name in an
	// ObservePlan.
	SnapResourcePfx = "resource:"
)

// Provider is one fake third party the harness serves on loopback: a set of
// actions, each POST <path> with a JSON body and an Idempotency-Key header,
// with the idempotency semantics of a real provider. Every call it acts on
// is an effect op, Proc ProcWorldPrefix+Name, F the action's name.
type Provider struct {
	Name string `json:"name"`
	// Kind is "" (plain actions) or a built-in kind with semantics of its
	// own: ProviderPayments (charges and refunds with amounts).
	Kind    string           `json:"kind,omitempty"`
	Actions []ProviderAction `json:"actions"`
}

// Built-in provider kinds.
const (
	// ProviderPayments keeps amounts: an action with Role "charge" moves
	// money in (a positive amount), one with Role "refund" moves it back
	// (it names its charge; at most what is left of it; 0 refunds the rest).
	ProviderPayments = "payments"
)

// Action roles in a payments provider.
const (
	RoleCharge = "charge"
	RoleRefund = "refund"
)

// Proc is the history's process name of the provider's effects.
func (p Provider) Proc() string { return ProcWorldPrefix + p.Name }

// Action returns the action named name.
func (p Provider) Action(name string) (ProviderAction, bool) {
	for _, a := range p.Actions {
		if a.Name == name {
			return a, true
		}
	}
	return ProviderAction{}, false
}

// ByRole returns the first action with role r.
func (p Provider) ByRole(r string) (ProviderAction, bool) {
	for _, a := range p.Actions {
		if a.Role == r {
			return a, true
		}
	}
	return ProviderAction{}, false
}

// ProviderAction is one endpoint of a provider.
type ProviderAction struct {
	// Name is the op function of its effects ("charge").
	Name string `json:"name"`
	// Path is the POST path ("/charges").
	Path string `json:"path"`
	// Saga is the request field naming the saga (aggregate) the call is
	// for: the effect op's Order. Required in every request unless Refers
	// can attribute the call through the effect it refers to.
	Saga string `json:"saga"`
	// Required lists further request fields that must be present.
	Required []string `json:"required,omitempty"`
	// Outcome is the request field whose value chooses the outcome: one
	// containing OutcomeDecline is declined (402), OutcomeAmbiguous500 is
	// applied and answered 500 on the first request of its key,
	// OutcomeAmbiguousHang is applied and never answered; anything else
	// succeeds. Empty: every call succeeds.
	Outcome string `json:"outcome,omitempty"`
	// Ambiguous declares that the nemesis may make calls of this action
	// ambiguous (applied, then answered 500 or never answered).
	Ambiguous bool `json:"ambiguous,omitempty"`
	// Answer is the HTTP status of a success (default 200).
	Answer int `json:"answer,omitempty"`
	// IDPrefix prefixes the ids the action issues ("ch_"; default the
	// action's first two letters and "_"); IDField is the effect value's
	// field holding it (default "id").
	IDPrefix string `json:"id_prefix,omitempty"`
	IDField  string `json:"id_field,omitempty"`
	// DeclineCode is the code of a declined answer (default "declined").
	DeclineCode string `json:"decline_code,omitempty"`
	// Refers names a request field holding the id of an earlier effect of
	// the same provider (a cancellation names its booking): an unknown id
	// is answered 404 and recorded as a rejected effect.
	Refers *Refers `json:"refers,omitempty"`
	// Role is the action's part in a built-in kind (RoleCharge, RoleRefund).
	Role string `json:"role,omitempty"`
	// Amount is the request field holding a payments action's amount in
	// minor units (default "amount").
	Amount string `json:"amount,omitempty"`
}

// Refers ties a request field to the action whose ids it holds.
type Refers struct {
	Field  string `json:"field"`
	Action string `json:"action"`
}

// Outcome tokens: a request's outcome field containing one chooses that
// outcome (ProviderAction.Outcome). The generator writes them.
const (
	OutcomeDecline       = "decline"
	OutcomeAmbiguous500  = "ambiguous_500"
	OutcomeAmbiguousHang = "ambiguous_hang"
)

// Effect statuses of the world.
const (
	EffectSucceeded = "succeeded"
	EffectDeclined  = "declined"
	EffectRejected  = "rejected"
)

// Workload is how the clients start, read and list sagas over the target's
// API (served by the manifest's api.process).
type Workload struct {
	// Op is the history's op function of a start ("place-order"; default
	// FStartSaga).
	Op string `json:"op,omitempty"`
	// Start starts one saga.
	Start StartSpec `json:"start"`
	// Read reads one saga; List lists every saga the target knows. The
	// observer lists (or, without List, reads each started saga) to learn
	// final statuses.
	Read *ReadSpec `json:"read,omitempty"`
	List *ListSpec `json:"list,omitempty"`
}

// OpName is the start op's function.
func (w Workload) OpName() string {
	if w.Op == "" {
		return FStartSaga
	}
	return w.Op
}

// StartSpec is one saga start: METHOD path with a JSON body drawn from
// the Body template (docs/target-contract.md, "Body templates") and the
// Idempotency-Key header; a 2xx answer holds the saga's id (and status).
type StartSpec struct {
	Method string          `json:"method,omitempty"` // default POST
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	// Key is the Idempotency-Key format ("k-{n}"; {n} is the saga's number
	// from 1); KeyHeader the header (default "Idempotency-Key").
	Key       string `json:"key,omitempty"`
	KeyHeader string `json:"key_header,omitempty"`
	// ID and Status are JSON pointers into a 2xx answer (default "/id",
	// "/status").
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
}

// ReadSpec reads one saga: GET Path with {id} replaced; pointers as in
// ListSpec.
type ReadSpec struct {
	Path   string `json:"path"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
	Key    string `json:"key,omitempty"`
	Trail  string `json:"trail,omitempty"`
}

// ListSpec lists every saga: GET Path answers a JSON array (or an object
// holding one at Items, a JSON pointer); ID, Status, Key (its
// Idempotency-Key) and Trail (its step trail) are JSON pointers into one
// element (defaults "/id", "/status", "/idempotency_key", "/trail"; Key
// and Trail may be absent from the answer).
type ListSpec struct {
	Path   string `json:"path"`
	Items  string `json:"items,omitempty"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
	Key    string `json:"key,omitempty"`
	Trail  string `json:"trail,omitempty"`
}

// Pointers returns the element pointers with their defaults.
func (l ListSpec) Pointers() (id, status, key, trail string) {
	return orDefault(l.ID, "/id"), orDefault(l.Status, "/status"), orDefault(l.Key, "/idempotency_key"), orDefault(l.Trail, "/trail")
}

// Pointers returns the pointers with their defaults.
func (r ReadSpec) Pointers() (id, status, key, trail string) {
	return ListSpec{ID: r.ID, Status: r.Status, Key: r.Key, Trail: r.Trail}.Pointers()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Resource is something the target must conserve.
//
// A counted resource (Kind "") has keys ("sku-1"…) with an initial amount
// each, drawn by the generator (Keys, Initial) or declared (Amounts), given
// to the target through the {{resource:NAME}} template, and read after
// quiescence by Observe's SQL (columns key, available, reserved):
// available ≥ 0, reserved ≥ 0, initial = available + reserved, and reserved
// = what the sagas that ended in the saga's success status hold (HeldBy).
//
// A payments resource (Kind ProviderPayments) is money at a payments
// provider: per saga, succeeded charges − succeeded refunds = HeldBy's
// quantity if it ended in success, else 0.
type Resource struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
	// Keys says how many keys to draw and how to name them.
	Keys *KeySpec `json:"keys,omitempty"`
	// Initial is the range each key's initial amount is drawn from;
	// Amounts declares them instead.
	Initial *Range           `json:"initial,omitempty"`
	Amounts map[string]int64 `json:"amounts,omitempty"`
	// Observe reads the final amounts (counted resources).
	Observe *ResourceQuery `json:"observe,omitempty"`
	// HeldBy says what a saga that ended in success holds, from its start
	// request's body.
	HeldBy *HeldBy `json:"held_by,omitempty"`
	// Provider is the payments provider (payments resources). The harness
	// fills Proc, Charge and Refund from its declaration in the target op.
	Provider string `json:"provider,omitempty"`
	Proc     string `json:"proc,omitempty"`
	Charge   string `json:"charge,omitempty"`
	Refund   string `json:"refund,omitempty"`
}

// KeySpec draws a resource's keys: Count of them, named by Format with {n}
// from 1 ("sku-{n}").
type KeySpec struct {
	Count  Range  `json:"count"`
	Format string `json:"format,omitempty"`
}

// KeyName is the n-th key (from 1).
func (k KeySpec) KeyName(n int) string {
	f := k.Format
	if f == "" {
		f = "{n}"
	}
	return strings.ReplaceAll(f, "{n}", itoa(n))
}

// Range is an inclusive integer range. Param names it: a scenario may
// override a named range (scenario "params").
type Range struct {
	Min   int    `json:"min"`
	Max   int    `json:"max"`
	Param string `json:"param,omitempty"`
}

// ResourceQuery is the SQL that reads a counted resource after quiescence:
// one row per key with columns key, available, reserved.
type ResourceQuery struct {
	DB  string `json:"db"`
	SQL string `json:"sql"`
}

// HeldBy says what a saga holds, read from its start request's body. Items
// is a JSON pointer to an array (each element holds Key units of Quantity,
// both field names of the element); without Items, Key and Quantity are
// JSON pointers into the body (Key may be empty for a resource without
// keys, or a payments resource).
type HeldBy struct {
	Items    string `json:"items,omitempty"`
	Key      string `json:"key,omitempty"`
	Quantity string `json:"quantity"`
}

// StartSaga is the invoke value of a start op: the request the client
// sent. Body is the JSON body exactly as sent.
type StartSaga struct {
	Key     string          `json:"key"`
	Attempt int             `json:"attempt,omitempty"`
	Body    json.RawMessage `json:"body"`
}

// RequestBody returns the body of a start op's invoke value: Body for a
// StartSaga, the value itself for an older history's PlaceOrder (whose
// fields are the body's). ok is false when value is not a JSON object.
func RequestBody(value json.RawMessage) (body json.RawMessage, ok bool) {
	var v struct {
		Body json.RawMessage `json:"body"`
	}
	if json.Unmarshal(value, &v) != nil {
		return nil, false
	}
	if len(v.Body) > 0 && v.Body[0] == '{' {
		return v.Body, true
	}
	return value, true
}

// ResourceInit is the value of FResourceInit: the initial amounts of one
// counted resource, by key.
type ResourceInit struct {
	Resource string           `json:"resource"`
	Amounts  map[string]int64 `json:"amounts"`
}

// ResourceState is the value of FResourceState: one key's final amounts.
type ResourceState struct {
	Resource  string `json:"resource"`
	Key       string `json:"key"`
	Available int64  `json:"available"`
	Reserved  int64  `json:"reserved"`
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
