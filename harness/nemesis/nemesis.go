// Package nemesis applies a scenario's fault plan to a running target and
// journals every fault it actually applied as nemesis ops in the history
// (start / end / instant, with the error if applying failed), so a replay
// can say how faithfully it matched the original.
//
// Triggers count orders invoked, not wall time, so a seed replays the same
// way; durations are the only clock the nemesis reads.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Components is what the nemesis needs from the running target: process
// control by instance name. Restart waits until the instance is healthy.
type Components interface {
	Kill(ctx context.Context, instance string) error
	Restart(ctx context.Context, instance string) error
	Pause(instance string) error
	Resume(instance string) error
}

// Ambiguity makes the next n calls of a world service ambiguous.
type Ambiguity interface {
	InjectAmbiguous(mode string, n int) error
}

// Rewinder rewinds the committed offsets of the consumer groups that a
// stopped component left empty.
type Rewinder interface {
	Rewind(ctx context.Context) (string, error)
}

// Trigger returns a channel closed once n orders have been invoked.
type Trigger func(n int) <-chan struct{}

// Nemesis applies faults. Create one per run.
type Nemesis struct {
	Rec        *models.Recorder
	Env        *env.Env
	Components Components
	Gateway    Ambiguity
	Rewinder   Rewinder
	Log        *slog.Logger

	mu     sync.Mutex
	active map[string]string // fault id → kind, while its window is open
}

// Active lists the faults whose window is open now (for the status line).
func (n *Nemesis) Active() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.active))
	for id, kind := range n.active {
		out = append(out, id+":"+kind)
	}
	return out
}

// Run applies every fault of the plan that is not armed at process start
// (failpoints are), each when its trigger fires. It returns when every
// fault has ended: its window closed, heal was closed (all windows close
// early), or the workload finished before its trigger (the fault is then
// journaled as skipped). Run never returns an error for a fault that could
// not be applied: that is journaled, and the run goes on.
func (n *Nemesis) Run(ctx context.Context, faults []scenarios.Fault, trigger Trigger, workloadDone, heal <-chan struct{}) {
	if n.Log == nil {
		n.Log = slog.Default()
	}
	n.active = map[string]string{}
	var wg sync.WaitGroup
	for _, f := range faults {
		if f.Kind == scenarios.FaultFailpoint {
			n.record(f, models.PhaseInstant, nil, map[string]string{"armed": f.Params["component"], "action": f.Params["action"], "hit": f.Params["hit"]})
			continue
		}
		wg.Add(1)
		go func(f scenarios.Fault) {
			defer wg.Done()
			select {
			case <-trigger(f.AfterOrders):
			case <-workloadDone:
				// A trigger past the end of the workload still fires if the
				// workload reached it; otherwise the fault never happened.
				select {
				case <-trigger(f.AfterOrders):
				default:
					n.record(f, models.PhaseInstant, errors.New("skipped: the workload ended before its trigger"), nil)
					return
				}
			case <-heal:
				n.record(f, models.PhaseInstant, errors.New("skipped: healed before its trigger"), nil)
				return
			case <-ctx.Done():
				return
			}
			n.apply(ctx, f, heal)
		}(f)
	}
	wg.Wait()
}

func (n *Nemesis) record(f scenarios.Fault, phase string, err error, detail map[string]string) {
	fr := models.FaultRecord{ID: f.ID, Kind: f.Kind, Phase: phase, Target: f.Target, Detail: detail}
	if err != nil {
		fr.Error = err.Error()
	}
	typ := models.Info
	n.Rec.Record(models.ProcNemesis, typ, f.Kind, "", fr)
	n.mu.Lock()
	switch {
	case phase == models.PhaseStart && err == nil:
		n.active[f.ID] = f.Kind
	case phase == models.PhaseEnd:
		delete(n.active, f.ID)
	}
	n.mu.Unlock()
}

// window waits for the fault's duration, or until heal or ctx.
func window(ctx context.Context, d time.Duration, heal <-chan struct{}) {
	if d <= 0 {
		d = 500 * time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-heal:
	case <-ctx.Done():
	}
}

func (n *Nemesis) apply(ctx context.Context, f scenarios.Fault, heal <-chan struct{}) {
	// The end of a window must happen even when the run is being torn down,
	// so undo steps use a context of their own.
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	switch f.Kind {
	case scenarios.FaultLinkDown, scenarios.FaultLatency, scenarios.FaultBandwidth, scenarios.FaultBlackhole, scenarios.FaultResetPeer, scenarios.FaultLimitData:
		n.linkFault(ctx, f, heal)
	case scenarios.FaultKill:
		if err := n.Components.Kill(ctx, f.Target); err != nil {
			n.record(f, models.PhaseStart, err, nil)
			return
		}
		n.record(f, models.PhaseStart, nil, nil)
		window(ctx, f.Duration.D(), heal)
		n.record(f, models.PhaseEnd, n.Components.Restart(undoCtx, f.Target), map[string]string{"action": "restart"})
	case scenarios.FaultPause:
		if err := n.Components.Pause(f.Target); err != nil {
			n.record(f, models.PhaseStart, err, nil)
			return
		}
		n.record(f, models.PhaseStart, nil, nil)
		window(ctx, f.Duration.D(), heal)
		n.record(f, models.PhaseEnd, n.Components.Resume(f.Target), nil)
	case scenarios.FaultDBCrash:
		if err := n.Env.CrashPostgres(ctx); err != nil {
			n.record(f, models.PhaseStart, err, nil)
			return
		}
		n.record(f, models.PhaseStart, nil, nil)
		window(ctx, f.Duration.D(), heal)
		n.record(f, models.PhaseEnd, n.Env.RestartPostgres(undoCtx), map[string]string{"action": "restart"})
	case scenarios.FaultKafkaProduceErr, scenarios.FaultKafkaCommitErr:
		n.kafkaFault(ctx, f, heal)
	case scenarios.FaultRewind:
		if err := n.Components.Kill(ctx, f.Target); err != nil {
			n.record(f, models.PhaseStart, err, nil)
			return
		}
		n.record(f, models.PhaseStart, nil, map[string]string{"action": "stopped " + f.Target})
		var detail map[string]string
		var err error
		if n.Rewinder == nil {
			err = errors.New("no rewinder: the Kafka provider cannot rewind groups")
		} else {
			var what string
			what, err = n.Rewinder.Rewind(undoCtx)
			detail = map[string]string{"rewound": what}
		}
		if rerr := n.Components.Restart(undoCtx, f.Target); rerr != nil {
			err = errors.Join(err, rerr)
		}
		n.record(f, models.PhaseEnd, err, detail)
	case scenarios.FaultGatewayAmbiguous:
		count, _ := strconv.Atoi(f.Params["count"])
		if count < 1 {
			count = 1
		}
		var err error
		if n.Gateway == nil {
			err = errors.New("no gateway")
		} else {
			err = n.Gateway.InjectAmbiguous(f.Params["mode"], count)
		}
		n.record(f, models.PhaseInstant, err, map[string]string{"mode": f.Params["mode"], "count": strconv.Itoa(count)})
	default:
		n.record(f, models.PhaseInstant, fmt.Errorf("unknown fault kind %q", f.Kind), nil)
	}
}

func (n *Nemesis) linkFault(ctx context.Context, f scenarios.Fault, heal <-chan struct{}) {
	l := n.Env.Link(f.Target)
	if l == nil {
		n.record(f, models.PhaseStart, fmt.Errorf("no link %q", f.Target), nil)
		return
	}
	toxic := "nemesis-" + f.ID
	atoi := func(k string, def int) int {
		if v, err := strconv.Atoi(f.Params[k]); err == nil {
			return v
		}
		return def
	}
	var err error
	switch f.Kind {
	case scenarios.FaultLinkDown:
		err = l.Down()
	case scenarios.FaultLatency:
		err = l.AddToxic(toxic, "latency", "downstream", map[string]any{"latency": atoi("latency_ms", 100), "jitter": atoi("jitter_ms", 0)})
	case scenarios.FaultBandwidth:
		err = l.AddToxic(toxic, "bandwidth", "downstream", map[string]any{"rate": atoi("rate_kb", 8)})
	case scenarios.FaultBlackhole:
		err = l.AddToxic(toxic, "timeout", "downstream", map[string]any{"timeout": 0})
	case scenarios.FaultResetPeer:
		err = l.AddToxic(toxic, "reset_peer", "downstream", map[string]any{"timeout": 0})
	case scenarios.FaultLimitData:
		err = l.AddToxic(toxic, "limit_data", "downstream", map[string]any{"bytes": atoi("bytes", 1024)})
	}
	n.record(f, models.PhaseStart, err, f.Params)
	if err != nil {
		return
	}
	window(ctx, f.Duration.D(), heal)
	if f.Kind == scenarios.FaultLinkDown {
		err = l.Up()
	} else {
		err = l.RemoveToxic(toxic)
	}
	n.record(f, models.PhaseEnd, err, nil)
}

func (n *Nemesis) kafkaFault(ctx context.Context, f scenarios.Fault, heal <-chan struct{}) {
	c := n.Env.KafkaCluster()
	if c == nil {
		n.record(f, models.PhaseStart, errors.New("broker faults need the embedded kfake cluster"), nil)
		return
	}
	count, _ := strconv.Atoi(f.Params["count"])
	if count < 1 {
		count = 1
	}
	key := kmsg.Produce
	if f.Kind == scenarios.FaultKafkaCommitErr {
		key = kmsg.OffsetCommit
	}
	// REQUEST_TIMED_OUT is the error kfake answers after doing the work: the
	// records are written (the offset is stored) and the client is told it
	// failed, exactly the ambiguity a real broker produces.
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerr.RequestTimedOut, Count: count})
	n.record(f, models.PhaseStart, nil, map[string]string{"count": strconv.Itoa(count)})
	window(ctx, f.Duration.D(), heal)
	hits := h.Hits()
	h.Remove()
	n.record(f, models.PhaseEnd, nil, map[string]string{"hits": strconv.Itoa(hits)})
}
