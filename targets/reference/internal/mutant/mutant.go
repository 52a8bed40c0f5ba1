// Package mutant is the single place where planted bugs (DESIGN §9) are
// switched on. The process reads SAGACHAOS_MUTANT once at start; code that
// can carry a bug asks Is(name) at exactly one spot, so each mutant is a
// small, reviewable deviation from the correct path.
package mutant

import (
	"fmt"
	"sort"
	"strings"
)

// Names of the planted bugs this target knows. Only names in Implemented
// change behaviour; the rest are accepted so a harness can list them, and
// are rejected at start until implemented.
const (
	DualWrite                 = "dual-write"
	PublishBeforeCommit       = "publish-before-commit"
	MarkBeforeAck             = "mark-before-ack"
	UnkeyedPublish            = "unkeyed-publish"
	ParallelRelayReorder      = "parallel-relay-reorder"
	NonIdempotentConsumer     = "non-idempotent-consumer"
	NonIdempotentCompensation = "non-idempotent-compensation"
	NoGatewayIdempotencyKey   = "no-gateway-idempotency-key"
	CompensationNotRetried    = "compensation-not-retried"
	VolatileSagaState         = "volatile-saga-state"
	NoStepTimeout             = "no-step-timeout"
	EmailBeforePivot          = "email-before-pivot"
	CompensateAfterPivot      = "compensate-after-pivot"
	NoSemanticLock            = "no-semantic-lock"
	OutOfOrderCompensation    = "out-of-order-compensation"
	// Planted for the invariants of issue 12 (MUTANTS.md says which real
	// class of bug each models).
	SkipFailedMessage = "skip-failed-message"
	RelayIDCursor     = "relay-id-cursor"
	CoalescingOutbox  = "coalescing-outbox"
	SilentApproval    = "silent-approval"
)

// Implemented lists the mutants whose switch exists in the code.
var Implemented = map[string]string{
	MarkBeforeAck:             "relay marks rows published before producing them",
	UnkeyedPublish:            "relay publishes records without the order id as key",
	NonIdempotentConsumer:     "consumers skip the processed-messages (inbox) check",
	NoGatewayIdempotencyKey:   "payment charges without an Idempotency-Key",
	ParallelRelayReorder:      "relays lock rows but not aggregates, so two relays may publish one order's rows out of order",
	NoSemanticLock:            "inventory checks stock without a row lock and updates unconditionally",
	DualWrite:                 "services commit, then publish directly (a crash in between loses the message); the relay is bypassed",
	PublishBeforeCommit:       "services publish directly inside the transaction, before it commits (a rollback leaves a phantom event)",
	VolatileSagaState:         "a restarted orchestrator forgets the sagas in flight (their state lived in memory)",
	NoStepTimeout:             "the orchestrator never times a step out: a lost reply leaves the saga PENDING",
	CompensationNotRetried:    "a compensation (release, cancel-charge) that times out is not sent again: the order is cancelled with its stock (and maybe a charge) still held",
	EmailBeforePivot:          "the confirmation e-mail is sent as soon as stock is reserved, before the charge",
	NonIdempotentCompensation: "inventory releases stock again for every ReleaseStock, even a re-sent or redelivered one for an already released order",
	OutOfOrderCompensation:    "a timed-out reservation's release gets its own Kafka key (can overtake the reserve) and a release with no reservation leaves no tombstone, so a later reserve is applied",
	CompensateAfterPivot:      "a delivery that does not confirm in time is compensated (refund, release, cancel) instead of retried",
	SkipFailedMessage:         "inventory's consumer logs a failed handler and moves on: the poll's offsets are committed anyway and the message is never applied",
	RelayIDCursor:             "relays find work with a high-water mark of published ids (id > last_id): a row whose id committed after a higher one was published is skipped",
	CoalescingOutbox:          "the outbox keeps one pending message per aggregate: a new message replaces the aggregate's unpublished ones",
	SilentApproval:            "the e-mail loop approves an order with a direct update and publishes no OrderApproved",
}

var current string

// Set validates and switches on the named mutant ("" for none).
func Set(name string) error {
	name = strings.TrimSpace(name)
	if name == "" {
		current = ""
		return nil
	}
	if _, ok := Implemented[name]; !ok {
		known := make([]string, 0, len(Implemented))
		for n := range Implemented {
			known = append(known, n)
		}
		sort.Strings(known)
		return fmt.Errorf("unknown mutant %q (implemented: %s)", name, strings.Join(known, ", "))
	}
	current = name
	return nil
}

// Is reports whether the named mutant is on.
func Is(name string) bool { return current != "" && current == name }
