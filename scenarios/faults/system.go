package faults

import "context"

// System is what faults act on: the running target and its environment as
// the nemesis hands them to Apply. Each accessor fails when the run has no
// such thing (a link that does not exist, broker faults on external
// brokers); the fault is then journaled as not applied.
type System interface {
	Link(name string) (Link, error)
	Components() Components
	Postgres() (Postgres, error)
	Broker() (Broker, error)
	World() (World, error)
	Consumers() (Consumers, error)
	Failpoints() Failpoints
}

// Outcome is what a call on a shared resource really did ("down",
// "already down: held by f2"); it is journaled as the fault's effect.
type Outcome = string

// Link is one proxied link. Down and Up are reference-counted per fault id:
// the link is cut by the first Down and restored by the last Up. Toxics are
// named per fault and compose as toxiproxy composes them.
type Link interface {
	Down(id string) (Outcome, error)
	Up(id string) (Outcome, error)
	AddToxic(name, typ string, stream Stream, attrs map[string]any) error
	RemoveToxic(name string) error
}

// Components controls component instances. Stop and Start, and Pause and
// Resume, are reference-counted per fault id: an instance stopped by two
// overlapping faults starts again when the second one ends; an instance
// that is already dead when a fault stops it is reported as such and is
// not killed again.
type Components interface {
	// Stop holds the instance down: SIGKILL if it runs, and no crash
	// restart until every hold is released.
	Stop(ctx context.Context, instance, id string) (Outcome, error)
	// Start releases the hold of id; the last release starts the instance
	// again and waits until it is healthy.
	Start(ctx context.Context, instance, id string) (Outcome, error)
	// Pause holds the instance paused (SIGSTOP).
	Pause(instance, id string) (Outcome, error)
	// Resume releases the pause of id; the last release resumes it.
	Resume(instance, id string) (Outcome, error)
}

// Postgres is the database server, reference-counted like Link.
type Postgres interface {
	Crash(ctx context.Context, id string) (Outcome, error)
	Restart(ctx context.Context, id string) (Outcome, error)
}

// Broker injects errors into the embedded Kafka broker.
type Broker interface {
	// AfterAct makes the next count requests of kind ("produce" or
	// "commit") act and then answer an error: records written, offsets
	// stored, the client told it failed.
	AfterAct(kind string, count int) (BrokerFault, error)
}

// BrokerFault is one injected broker fault.
type BrokerFault interface {
	// Hits counts the requests it answered.
	Hits() int
	// Remove withdraws what is left of it.
	Remove()
}

// World is the target's world providers (the manifest's world).
type World interface {
	// InjectAmbiguous makes the next n calls of target ("provider/action",
	// an action that declares ambiguity) ambiguous: applied, then answered
	// 500 ("500") or never answered ("hang").
	InjectAmbiguous(target, mode string, n int) error
	// AmbiguousActions lists the actions that declare ambiguity, sorted.
	AmbiguousActions() []string
}

// Consumers rewinds consumer groups.
type Consumers interface {
	// Groups returns the consumer groups the process of instance declares
	// (manifest consumes) and every instance of that process: a group can
	// be rewound only once none of them is a member.
	Groups(instance string) (groups, instances []string, err error)
	// Rewind waits until each group is empty, then commits offset 0 for
	// each of its partitions. It returns what it rewound.
	Rewind(ctx context.Context, groups []string) (string, error)
}

// Failpoints says what the target stage armed before the components
// started.
type Failpoints interface {
	// Armed reports the instance fault id is armed on.
	Armed(id string) (instance string, ok bool)
}
