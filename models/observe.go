package models

// This file is the vocabulary of the observer's waits after heal: what it
// saw while it waited, so that a checker can prove a liveness failure (a
// saga or an outbox row stuck while everything was healthy) from the
// history alone, and what it planned to record, so that a checker can tell
// a complete observation from a cut-off one.

// Observer state functions (Type State) of the waits and the plan.
const (
	// FObservePlan is written once, before the observer's first snapshot:
	// the closing snapshots it is going to write. Value: ObservePlan. A
	// history that has it must close every listed snapshot before run-end
	// to count as complete.
	FObservePlan = "observe-plan"
	// FOutboxDrain closes the drain watch of one outbox database (after
	// heal and quiesce, before the Kafka log is read). Value: OutboxDrain.
	FOutboxDrain = "outbox-drain"
	// FConsumerOffsets is one consumer group's committed offsets, read
	// after the observer waited for the group to catch up and before any
	// applied snapshot. Value: ConsumerOffsets.
	FConsumerOffsets = "consumer-offsets"
)

// Snapshot names in ObservePlan.Snapshots: "kafka", "orders", "stock",
// "outbox:<db>", "applied:<db>", "drain:<db>", "offsets:<group>". They name
// the closing op a complete history has: FKafkaSnapshot, FOrdersSnapshot,
// FStockSnapshot, FOutboxSnapshot and FAppliedSnapshot (with DB), FOutboxDrain
// (with DB) and FConsumerOffsets (with Group).
const (
	SnapKafka     = "kafka"
	SnapOrders    = "orders"
	SnapStock     = "stock"
	SnapOutboxPfx = "outbox:"
	SnapApplied   = "applied:"
	SnapDrainPfx  = "drain:"
	SnapOffsetPfx = "offsets:"
)

// ObservePlan is the value of FObservePlan.
type ObservePlan struct {
	Snapshots []string `json:"snapshots"`
}

// OutboxDrain is what the observer saw while it waited for one outbox to
// drain. Times (…T) are history times: nanoseconds since the run's start,
// the clock of Op.T.
type OutboxDrain struct {
	DB string `json:"db"`
	// SettleMS is the settle window the scenario asked for: an unpublished
	// row is stuck once it stayed unpublished that long with every relay
	// healthy and the outbox idle.
	SettleMS int64 `json:"settle_ms"`
	// FromT and ToT are the times of the first and the last poll; Polls
	// counts the polls in between that answered.
	FromT int64 `json:"from_t"`
	ToT   int64 `json:"to_t"`
	Polls int   `json:"polls"`
	// IdleSinceT is the time of the first poll since which the outbox did
	// not change: no row added, none published, none deleted.
	IdleSinceT int64 `json:"idle_since_t"`
	// Pending are the rows unpublished at the last poll.
	Pending []PendingRow `json:"pending,omitempty"`
	// Drained: no row was unpublished at the last poll.
	Drained bool `json:"drained"`
	// Error: the last poll failed; the watch proves nothing.
	Error string `json:"error,omitempty"`
}

// PendingRow is one outbox row unpublished at the drain watch's last poll.
type PendingRow struct {
	ID        int64  `json:"id"`
	EventID   string `json:"event_id"`
	Aggregate string `json:"aggregate,omitempty"`
	Type      string `json:"type,omitempty"`
	// FirstSeenT is the first poll that saw the row unpublished.
	FirstSeenT int64 `json:"first_seen_t"`
}

// ConsumerOffsets is one consumer group's committed offsets at
// observation.
type ConsumerOffsets struct {
	Group    string `json:"group"`
	Consumer string `json:"consumer,omitempty"`
	// Partitions of the group's declared topics: the committed offset (the
	// next record the group will process; -1: none committed) and the end
	// (high watermark) when the offsets were read.
	Partitions []PartitionOffset `json:"partitions,omitempty"`
	// LagFree: committed = end on every partition (the group had caught
	// up); WaitedMS is how long the observer waited for it.
	LagFree  bool   `json:"lag_free"`
	WaitedMS int64  `json:"waited_ms"`
	Error    string `json:"error,omitempty"`
}

// PartitionOffset is one partition of ConsumerOffsets.
type PartitionOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
}

// SagaWatch is one saga still pending when the quiesce stage stopped:
// what it last saw of it.
type SagaWatch struct {
	ID     string   `json:"id"`
	Status string   `json:"status"`
	Trail  []string `json:"trail,omitempty"`
	// ChangedT is the last time the quiesce stage saw the saga change: its
	// status or trail, or the number or the last id of its outbox rows
	// (a timed-out step re-sent or compensated writes a row). FromT of the
	// watch when it never changed.
	ChangedT int64 `json:"changed_t"`
	// Rows and MaxID are the saga's outbox rows (over every observed
	// outbox) at the last check.
	Rows  int64 `json:"rows"`
	MaxID int64 `json:"max_id,omitempty"`
	// Unpublished: the saga's rows did change after ChangedT, but every
	// row first seen since was unpublished — the Kafka log did not grow
	// from ChangedT to the last check, a settle window or more with every
	// component healthy — so its owner's re-sends reached no one (a relay
	// that publishes nothing) and ChangedT is the log's last growth.
	Unpublished bool `json:"unpublished,omitempty"`
}
