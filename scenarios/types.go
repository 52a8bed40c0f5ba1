package scenarios

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sagachaos/sagachaos/models"
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
}

// Workload is the concrete list of orders the clients place.
type Workload struct {
	InitialStock map[string]int64 `json:"initial_stock"`
	Clients      int              `json:"clients"`
	Orders       []OrderPlan      `json:"orders"`
}

// OrderPlan is one order a client places.
type OrderPlan struct {
	Key      string        `json:"key"`
	Customer string        `json:"customer"`
	Items    []models.Item `json:"items"`
	Card     string        `json:"card"`
	Total    int64         `json:"total"`
	// Client is the client (0-based) that places it; a client places its
	// orders in plan order.
	Client int `json:"client"`
	// Submissions is how many times the same request (same key) is sent
	// back to back; >1 models a double-click or a proxy retry.
	Submissions int `json:"submissions,omitempty"`
	// RetryUnknown: after an indeterminate outcome (timeout, 5xx), retry
	// with the same key up to this many times.
	RetryUnknown int `json:"retry_unknown,omitempty"`
	// Gap is the pause before this order (0 inside a burst).
	Gap Duration `json:"gap,omitempty"`
}

// Fault kinds (DESIGN §6).
const (
	FaultLinkDown         = "link-down"         // Target: link; window
	FaultLatency          = "latency"           // Target: link; Params latency, jitter; window
	FaultBandwidth        = "bandwidth"         // Target: link; Params rate (KB/s); window
	FaultBlackhole        = "blackhole"         // Target: link; toxiproxy "timeout"; window
	FaultResetPeer        = "reset-peer"        // Target: link; window
	FaultLimitData        = "limit-data"        // Target: link; Params bytes; window
	FaultFailpoint        = "failpoint"         // Target: failpoint name; Params action ("crash"…), hit, component
	FaultKill             = "kill"              // Target: component instance; SIGKILL then restart after Duration
	FaultPause            = "pause"             // Target: component instance; SIGSTOP for Duration
	FaultDBCrash          = "db-crash"          // SIGKILL the postmaster, restart after Duration
	FaultKafkaProduceErr  = "kafka-produce-err" // records written, then answered with an error; Params count
	FaultKafkaCommitErr   = "kafka-commit-err"  // offset stored, then answered with an error; Params count
	FaultRewind           = "rewind"            // Target: consumer group; rewind committed offsets to the start
	FaultGatewayAmbiguous = "gateway-ambiguous" // next Params count charges: applied, then answered 500 or hang (Params mode)
)

// FaultKinds lists every kind the nemesis knows.
var FaultKinds = []string{FaultLinkDown, FaultLatency, FaultBandwidth, FaultBlackhole, FaultResetPeer, FaultLimitData,
	FaultFailpoint, FaultKill, FaultPause, FaultDBCrash, FaultKafkaProduceErr, FaultKafkaCommitErr, FaultRewind, FaultGatewayAmbiguous}

// Fault is one planned fault. Triggers count orders placed, not wall time,
// so a seed replays the same way.
type Fault struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	// AfterOrders starts the fault once this many orders have been invoked.
	AfterOrders int `json:"after_orders"`
	// Duration is the fault window (or the down time before a restart).
	Duration Duration          `json:"duration,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
}

// Limits bound a run.
type Limits struct {
	// TimeLimit bounds the whole run; past it the run is interrupted.
	TimeLimit Duration `json:"time_limit"`
	// Quiesce bounds the wait for in-flight sagas after healing.
	Quiesce Duration `json:"quiesce"`
	// ClientTimeout bounds one HTTP request of the workload.
	ClientTimeout Duration `json:"client_timeout"`
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
