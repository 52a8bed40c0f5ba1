package faults

import (
	"context"
	"fmt"
	"slices"

	"pgregory.net/rapid"
)

// SlotKill SIGKILLs a relay by its part in a replication slot: the
// instance holding the slot while it streams (who=holder: a competing
// relay must take the slot over, and re-stream from the confirmed
// position), or one waiting for it (who=waiter: it must come back and
// wait again). It keeps the instance down for the window, then starts it
// again, as kill does.
type SlotKill struct {
	Who string `json:"who" doc:"holder (the instance streaming the slot) or waiter (one of the others competing for it)"`
}

func init() { Register(func() Kind { return &SlotKill{Who: "holder"} }) }

// Name implements Kind.
func (*SlotKill) Name() string { return "slot-kill" }

// Doc implements Kind.
func (*SlotKill) Doc() string {
	return "SIGKILLs the relay holding a replication slot (or one waiting for it), restarts it when the window ends"
}

// Validate implements Kind.
func (p *SlotKill) Validate() error {
	if p.Who != "holder" && p.Who != "waiter" {
		return Bad(p, "who", "%q (want holder or waiter)", p.Who)
	}
	return nil
}

// Draw implements Kind: a declared slot; a waiter only where two or more
// instances compete for it.
func (p *SlotKill) Draw(t *rapid.T, a Aim) (string, bool) {
	db, ok := drawSlot(a, 1, func(xs []string) string { return Pick(t, xs, "slot") })
	if !ok {
		return "", false
	}
	p.Who = "holder"
	for _, s := range a.Slots {
		if s.DB == db && len(s.Instances) > 1 && rapid.Bool().Draw(t, "waiter") {
			p.Who = "waiter"
		}
	}
	return db, true
}

// Apply implements Kind.
func (p *SlotKill) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
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
	victim := v.Holder
	if p.Who == "waiter" {
		victim = ""
		for _, in := range sl.Instances(f.Target) {
			if in != v.Holder {
				victim = in
				break
			}
		}
		if victim == "" {
			return Effect{}, fmt.Errorf("slot of %s: no instance but its holder %s competes for it", f.Target, v.Holder)
		}
	}
	c := s.Components()
	out, err := c.Stop(ctx, victim, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out, "instance": victim, "slot": v.describe()},
		Undo: func(ctx context.Context) (map[string]string, error) {
			d := map[string]string{"action": "restart", "instance": victim}
			if now, err := sl.Slot(ctx, f.Target); err != nil {
				d["slot_error"] = err.Error()
			} else {
				d["slot"] = now.describe()
				if p.Who == "holder" && now.Holder != "" && now.Holder != victim && slices.Contains(sl.Instances(f.Target), now.Holder) {
					d["taken_over_by"] = now.Holder
				}
			}
			out, err := c.Start(ctx, victim, f.ID)
			d["effect"] = out
			return d, err
		},
	}, nil
}
