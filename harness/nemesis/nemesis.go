// Package nemesis applies a scenario's fault plan to a running target and
// journals what took effect as nemesis ops in the history (start / end /
// instant, fired for an armed failpoint that ran, with the error if
// applying failed), so a replay can say how faithfully it matched the
// original.
//
// The fault kinds are the registry of scenarios/faults: the nemesis waits
// for each fault's trigger, calls its kind's Apply with the System it
// implements here, waits out the window and calls the Undo. The System makes
// overlapping faults on one resource compose (reference counts per link,
// per component instance, for PostgreSQL), and every undo gets a context
// that ends a couple of seconds after an interrupt, so Ctrl-C never waits
// on a fault.
//
// Triggers count events, not wall time, so a seed replays the same way:
// orders invoked, or (a fault aimed at a saga moment) world effects,
// failpoint and marker lines and broker records, counted by Events; the
// event that fired a fault is journaled with its start ("trigger").
// Durations (windows, a trigger's delay) are the only clock the nemesis
// reads.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Target is what the nemesis needs from the target stage: component holds,
// the failpoints it armed, and which groups a consumer declares.
type Target interface {
	faults.Components
	faults.Failpoints
	Groups(instance string) (groups, instances []string, err error)
}

// Rewinder rewinds consumer groups to the start of the log.
type Rewinder interface {
	Rewind(ctx context.Context, groups []string) (string, error)
}

// Trigger returns a channel closed once n orders have been invoked.
type Trigger func(n int) <-chan struct{}

// Undo budget: an undo may take this long in all, and this long after the
// run was interrupted.
const (
	undoLimit = 60 * time.Second
	undoGrace = 2 * time.Second
)

// Nemesis applies faults. Create one per run.
type Nemesis struct {
	Rec      *models.Recorder
	Env      *env.Env
	Target   Target
	World    faults.World
	Rewinder Rewinder
	// Events counts the events of aimed faults' triggers; nil: such
	// faults are journaled as skipped.
	Events *Events
	Log    *slog.Logger
	// Slots sees the target's replication slots (nil: it declares none);
	// the CDC kinds need it (slots.go).
	Slots faults.Slots

	mu     sync.Mutex
	active map[string]string // fault id → kind, while its window is open
	holds  holds
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

// Run applies every fault of the plan, each when its trigger fires. It
// returns when every fault has ended: its window closed, heal was closed
// (all windows close early), or the workload finished before its trigger
// (the fault is then journaled as skipped). Run never returns an error for
// a fault that could not be applied: that is journaled, and the run goes
// on.
func (n *Nemesis) Run(ctx context.Context, plan []scenarios.Fault, trigger Trigger, workloadDone, heal <-chan struct{}) {
	if n.Log == nil {
		n.Log = slog.Default()
	}
	n.mu.Lock()
	n.active = map[string]string{}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range plan {
		wg.Go(func() {
			tr := f.When()
			var fired <-chan string
			switch {
			case tr.On == scenarios.TriggerOrders:
				fired = orders(trigger, tr.Count, heal, ctx.Done())
			case n.Events == nil:
				n.record(f, models.PhaseInstant, errors.New("skipped: no event source for its trigger"), nil)
				return
			default:
				fired = n.Events.Wait(tr)
			}
			var fallback <-chan string
			if tr.On != scenarios.TriggerOrders && tr.Fallback > 0 {
				fallback = orders(trigger, tr.Fallback, heal, ctx.Done())
			}
			done := workloadDone
			var why string
			for why == "" {
				select {
				case why = <-fired:
				case at := <-fallback:
					why = fmt.Sprintf("fell back at %s: %v", at, n.notReached(tr, "its event had not come"))
				case <-done:
					done = nil
					if tr.On != scenarios.TriggerOrders {
						// Sagas in flight go on making events until heal.
						continue
					}
					// A trigger past the end of the workload still fires if
					// the workload reached it; otherwise the fault never
					// happened.
					select {
					case why = <-fired:
					default:
						n.record(f, models.PhaseInstant, errors.New("skipped: the workload ended before its trigger"), nil)
						return
					}
				case <-heal:
					n.record(f, models.PhaseInstant, n.notReached(tr, "skipped: healed before its trigger"), nil)
					return
				case <-ctx.Done():
					return
				}
			}
			if d := tr.Delay.D(); d > 0 && !sleepUnless(ctx, d, heal) {
				n.record(f, models.PhaseInstant, fmt.Errorf("skipped: healed during the trigger's %v delay (%s)", d, why), nil)
				return
			}
			n.apply(ctx, f, heal, why)
		})
	}
	wg.Wait()
}

// orders adapts the order-count trigger to the channel of an event.
func orders(trigger Trigger, count int, heal, done <-chan struct{}) <-chan string {
	ch := make(chan string, 1)
	at := trigger(count)
	go func() {
		select {
		case <-at:
			ch <- fmt.Sprintf("%d orders invoked", count)
		case <-heal:
		case <-done:
		}
	}()
	return ch
}

// notReached is the skip error of an event trigger that never fired,
// with how far its count got.
func (n *Nemesis) notReached(t scenarios.Trigger, msg string) error {
	if t.On == scenarios.TriggerOrders || n.Events == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s (%s: %d of %d events)", msg, t.String(), n.Events.Counts(t), t.Count)
}

// sleepUnless waits d; it reports false if heal or ctx came first.
func sleepUnless(ctx context.Context, d time.Duration, heal <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-heal:
	case <-ctx.Done():
	}
	return false
}

// apply runs one fault: Apply, the window, Undo, each journaled; why is
// the event that triggered it.
func (n *Nemesis) apply(ctx context.Context, f scenarios.Fault, heal <-chan struct{}, why string) {
	k, err := f.Spec()
	if err != nil {
		n.record(f, models.PhaseInstant, err, nil)
		return
	}
	detail := faults.Strings(k)
	if f.Trigger != nil {
		detail["trigger"] = why
	}
	eff, err := k.Apply(ctx, system{n}, f.View())
	if err != nil {
		n.record(f, models.PhaseInstant, err, detail)
		return
	}
	maps.Copy(detail, eff.Detail)
	if eff.Undo == nil {
		n.record(f, models.PhaseInstant, nil, detail)
		return
	}
	n.record(f, models.PhaseStart, nil, detail)
	if !eff.Immediate {
		window(ctx, f.Duration.D(), heal)
	}
	uctx, cancel := undoContext(ctx)
	defer cancel()
	end, err := eff.Undo(uctx)
	n.record(f, models.PhaseEnd, err, end)
}

func (n *Nemesis) record(f scenarios.Fault, phase string, err error, detail map[string]string) {
	fr := models.FaultRecord{ID: f.ID, Kind: f.Kind, Phase: phase, Target: f.Target, Detail: detail}
	if err != nil {
		fr.Error = err.Error()
	}
	n.Rec.Record(models.ProcNemesis, models.Info, f.Kind, "", fr)
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

// undoContext is the context of an undo: the end of a window must happen
// even while the run is being torn down, so it outlives ctx — but by
// undoGrace only, so an interrupt never waits on a stalled undo (the
// harness's cleanup then kills whatever the undo could not bring back).
func undoContext(ctx context.Context) (context.Context, context.CancelFunc) {
	u, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoLimit)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(undoGrace, cancel) })
	return u, func() { stop(); cancel() }
}
