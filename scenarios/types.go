package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Scenario is everything needed to run (and re-run) one case: the concrete
// workload and fault plan generated from a seed. It is what scenario.json in
// a run directory holds.
type Scenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Seed        uint64   `json:"seed"`
	Workload    Workload `json:"workload"`
	Faults      []Fault  `json:"faults,omitempty"`
	Limits      Limits   `json:"limits"`
	// Replicas overrides the manifest's replica count per process
	// (e.g. {"relay": 2}).
	Replicas map[string]int `json:"replicas,omitempty"`
	// Swarm is what a swarm scenario enabled for this seed (the fault
	// kinds, the components, the workload features); nil: not a swarm.
	Swarm *SwarmDraw `json:"swarm,omitempty"`
	// Scale is the --scale the scenario was generated with (0: 1).
	Scale float64 `json:"scale,omitempty"`
}

// Fault is one planned fault. Triggers count events — sagas started, world
// effects, failpoint and marker lines, broker records — not wall time, so a
// seed replays the same way. The kinds, their parameters and what they do
// are the registry of package scenarios/faults.
type Fault struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	// AfterOrders starts the fault once this many sagas have been started
	// (when Trigger is nil).
	AfterOrders int `json:"after_orders"`
	// Trigger, when set, starts the fault at an event of the run instead
	// (trigger.go).
	Trigger *Trigger `json:"trigger,omitempty"`
	// Round is the round of the schedule the fault belongs to (from 1; 0:
	// a schedule without rounds, or an aimed fault).
	Round int `json:"round,omitempty"`
	// Aim says which saga moment an aimed fault was drawn for ("step
	// charge", "compensation release-stock", "consumes ReserveStock",
	// "marker orders.timeout.charging"), for reading the plan.
	Aim string `json:"aim,omitempty"`
	// Duration is the fault window (or the down time before a restart).
	Duration Duration `json:"duration,omitempty"`
	// Params are the kind's typed parameters (and the kind's behaviour);
	// nil reads as the kind's defaults.
	Params faults.Kind `json:"params,omitempty"`
}

// FaultError is a fault of a scenario that cannot be used: an unknown kind
// or a bad parameter. It names the fault and the field.
type FaultError struct {
	ID, Kind, Field, Problem string
}

func (e *FaultError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("fault %s: %s", e.ID, e.Problem)
	}
	return fmt.Sprintf("fault %s (%s): field %s: %s", e.ID, e.Kind, e.Field, e.Problem)
}

// Spec returns the fault's parameters, the kind's defaults when none were
// given.
func (f Fault) Spec() (faults.Kind, error) {
	if f.Params != nil {
		return f.Params, nil
	}
	return faults.New(f.Kind)
}

// View is what the fault's kind sees of it when it is applied.
func (f Fault) View() faults.Fault {
	return faults.Fault{ID: f.ID, Target: f.Target, Duration: f.Duration.D()}
}

// UnmarshalJSON reads a fault and decodes its parameters by its kind,
// strictly: an unknown kind, an unknown parameter or a bad value is a
// *FaultError.
func (f *Fault) UnmarshalJSON(b []byte) error {
	type plain Fault
	var raw struct {
		plain
		Params json.RawMessage `json:"params,omitempty"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*f = Fault(raw.plain)
	if f.Trigger != nil {
		if err := f.Trigger.Validate(); err != nil {
			return &FaultError{ID: f.ID, Kind: f.Kind, Problem: err.Error()}
		}
	}
	k, err := faults.Decode(f.Kind, raw.Params)
	if err != nil {
		var pe *faults.ParamError
		if errors.As(err, &pe) {
			return &FaultError{ID: f.ID, Kind: f.Kind, Field: "params." + pe.Field, Problem: pe.Problem}
		}
		return &FaultError{ID: f.ID, Kind: f.Kind, Problem: err.Error()}
	}
	f.Params = k
	return nil
}

// MarshalJSON writes a fault; a kind without parameters writes none.
func (f Fault) MarshalJSON() ([]byte, error) {
	type plain Fault
	out := struct {
		plain
		Params json.RawMessage `json:"params,omitempty"`
	}{plain: plain(f)}
	if f.Params != nil {
		b, err := json.Marshal(f.Params)
		if err != nil {
			return nil, err
		}
		if string(b) != "{}" {
			out.Params = b
		}
	}
	return json.Marshal(out)
}

// Limits bound a run.
type Limits struct {
	// TimeLimit bounds the whole run; past it the run is interrupted.
	TimeLimit Duration `json:"time_limit"`
	// Quiesce bounds the wait for in-flight sagas after healing.
	Quiesce Duration `json:"quiesce"`
	// ClientTimeout bounds one HTTP request of the workload.
	ClientTimeout Duration `json:"client_timeout"`
	// Settle is the outbox-drains settle window: after heal, a committed
	// row still unpublished after this long with every relay healthy and
	// the outbox idle is stuck (0: the observer's default, 2s).
	Settle Duration `json:"settle,omitempty"`
	// StuckTimeouts is k: after heal, a pending saga unchanged for k of
	// the saga's step timeouts with every component healthy is stuck, and
	// the quiesce wait stops before its deadline (0: the default, 3).
	StuckTimeouts int `json:"stuck_timeouts,omitempty"`
}

// Duration is a time.Duration that reads and writes as "1.5s".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string ("250ms") or a number of
// nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want a string like \"2s\", got %s", b)
	}
	*d = Duration(n)
	return nil
}
