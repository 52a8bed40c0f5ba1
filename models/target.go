package models

// This file is the shared vocabulary for what the target's components do
// during a run and for what the target's manifest declares that checkers
// need. The harness writes these ops as things happen; checkers and reports
// read them. A checker must never read the manifest itself: a saved run is
// re-checked offline from its history alone.

// Target components. Proc is ProcComponentPrefix + instance name
// ("component/relay-1"), Type Info. The harness's target stage writes them.
const (
	ProcComponentPrefix = "component/"

	// FComponentStart: an incarnation of the instance was started.
	// Value: ComponentEvent (Incarnation, Pid, Cause).
	FComponentStart = "start"
	// FComponentHealthy: the incarnation answered its health check.
	// Value: ComponentEvent (Incarnation, WaitedMS).
	FComponentHealthy = "healthy"
	// FComponentExit: the incarnation's process exited. Value:
	// ComponentEvent (Incarnation, Status, Expected, Cause).
	FComponentExit = "exit"
	// FFailpoint: a line of the component's failpoint log, copied into the
	// history as it is written (a point reached for the first time in this
	// process's life, or an armed action firing). Value: FailpointEvent.
	FFailpoint = "failpoint"
)

// ComponentEvent is the value of the component lifecycle ops.
type ComponentEvent struct {
	Instance string `json:"instance"`
	// Incarnation counts starts of the instance: 1 for the first.
	Incarnation int `json:"incarnation"`
	Pid         int `json:"pid,omitempty"`
	// Cause says why: for a start "initial", "crash-restart", "fault:<id>"
	// (the nemesis restarted it), "heal"; for an exit "fault:<id>" or
	// "harness" when it was stopped on purpose, "" when it died by itself.
	Cause string `json:"cause,omitempty"`
	// Status is the exit status ("signal: killed", "exit status 2").
	Status string `json:"status,omitempty"`
	// Expected marks an exit the nemesis or the harness caused.
	Expected bool `json:"expected,omitempty"`
	// WaitedMS is, for healthy, the time from start to the first 2xx.
	WaitedMS int64 `json:"waited_ms,omitempty"`
}

// FailpointEvent is one line of a component's failpoint log
// (docs/target-contract.md): a point reached (first time in the process's
// life; Fired false) or an armed action that fired there (Fired true).
type FailpointEvent struct {
	Instance  string `json:"instance"`
	Failpoint string `json:"failpoint"`
	Hit       int    `json:"hit,omitempty"`
	Action    string `json:"action,omitempty"`
	Fired     bool   `json:"fired,omitempty"`
}

// Harness info ops about the target (Proc ProcHarness, Type Info).
const (
	// FTarget is written once, right after run-start: what the manifest
	// declares that checkers need. Value: TargetDecl.
	FTarget = "target"
	// FHealed is written when the heal step ends: every link restored,
	// every component resumed or restarted, and whether each became
	// healthy. Value: Healed. Nothing of the fault plan acts after it.
	FHealed = "healed"
)

// TargetDecl is the value of FTarget.
type TargetDecl struct {
	Name string `json:"name"`
	// Consumers are the processes' declared consumer groups (manifest
	// processes[].consumes), with topics as they are named in the log.
	Consumers []ConsumerDecl `json:"consumers,omitempty"`
	// Relays are the instances whose role is "relay": the processes that
	// publish outbox rows.
	Relays []string `json:"relays,omitempty"`
	// Instances are every component instance of the run.
	Instances []string `json:"instances,omitempty"`
	// Saga is the saga the target implements, when the manifest declares
	// one (nil: an outbox-only target, or a history that predates it).
	Saga *SagaSpec `json:"saga,omitempty"`
	// OutboxOnly marks a target whose manifest declares no saga: only the
	// outbox and delivery checkers apply. A declaration with neither Saga
	// nor OutboxOnly predates the domain declarations: it is the order
	// domain's (LegacyOrderDomain).
	OutboxOnly bool `json:"outbox_only,omitempty"`
	// Resources are what the target must conserve (conservation).
	Resources []Resource `json:"resources,omitempty"`
	// SeqFromOutbox: the target's records carry no seq header; per
	// aggregate, the order of its rows in the outbox (by id) is its commit
	// order, and checkers judge order by it.
	SeqFromOutbox bool `json:"seq_from_outbox,omitempty"`
	// StartOp is the op function of the clients' saga starts (default
	// FStartSaga).
	StartOp string `json:"start_op,omitempty"`
}

// Domain returns what d declares about the domain, with the order domain
// for a declaration that predates the domain fields (no saga and not
// outbox-only) and for a history with no target op (d nil).
func (d *TargetDecl) Domain() (saga *SagaSpec, resources []Resource, legacy bool) {
	if d == nil || (d.Saga == nil && !d.OutboxOnly) {
		s, r := LegacyOrderDomain()
		return &s, r, true
	}
	return d.Saga, d.Resources, false
}

// ConsumerDecl is one consumer a process declares.
type ConsumerDecl struct {
	// Process is the manifest process; Instances its running instances.
	Process   string   `json:"process"`
	Instances []string `json:"instances,omitempty"`
	// Consumer is the name the applied query reports in its consumer
	// column for this consumer.
	Consumer string `json:"consumer"`
	// Group is the Kafka consumer group id.
	Group string `json:"group,omitempty"`
	// Topics it consumes, as named in the broker log.
	Topics []string `json:"topics"`
	// Types are the record types it applies (records it handles get an
	// applied record); other types are skipped legitimately. Empty: every
	// record of Topics.
	Types []string `json:"types,omitempty"`
}

// Healed is the value of FHealed.
type Healed struct {
	// Healthy lists the instances healthy at the end of heal; Unhealthy
	// those that were not (with the reason in Errors, by instance).
	Healthy   []string          `json:"healthy,omitempty"`
	Unhealthy []string          `json:"unhealthy,omitempty"`
	Errors    map[string]string `json:"errors,omitempty"`
}
