package faults

import (
	"context"
	"fmt"

	"pgregory.net/rapid"
)

// SlotStall stalls the relay holding a replication slot (SIGSTOP) for the
// window while the workload goes on: WAL accumulates behind the slot, no
// other relay can take it (its walsender still holds it), and on SIGCONT
// the relay must catch up. The journal says how much the lag grew.
type SlotStall struct{}

func init() { Register(func() Kind { return &SlotStall{} }) }

// Name implements Kind.
func (*SlotStall) Name() string { return "slot-stall" }

// Doc implements Kind.
func (*SlotStall) Doc() string {
	return "SIGSTOPs the relay holding a replication slot for the window while WAL accumulates, then SIGCONTs it"
}

// Validate implements Kind.
func (*SlotStall) Validate() error { return nil }

// Draw implements Kind: a declared slot.
func (*SlotStall) Draw(t *rapid.T, a Aim) (string, bool) {
	return drawSlot(a, 1, func(xs []string) string { return Pick(t, xs, "slot") })
}

// Apply implements Kind.
func (*SlotStall) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	sl, err := slotsOf(s)
	if err != nil {
		return Effect{}, err
	}
	v, held, err := waitHeld(ctx, sl, f.Target, nil)
	if err != nil {
		return Effect{}, err
	}
	if !held {
		return Effect{}, fmt.Errorf("slot of %s: nobody held it within %v (%s)", f.Target, holderWait, v.describe())
	}
	c := s.Components()
	out, err := c.Pause(v.Holder, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out, "instance": v.Holder, "slot": v.describe()},
		Undo: func(ctx context.Context) (map[string]string, error) {
			d := map[string]string{"instance": v.Holder}
			if now, err := sl.Slot(ctx, f.Target); err != nil {
				d["slot_error"] = err.Error()
			} else {
				d["slot"] = now.describe()
				d["lag_grew_bytes"] = fmt.Sprint(now.LagBytes - v.LagBytes)
			}
			out, err := c.Resume(v.Holder, f.ID)
			d["effect"] = out
			return d, err
		},
	}, nil
}
