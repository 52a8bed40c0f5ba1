package faults

import (
	"context"
	"fmt"

	"pgregory.net/rapid"
)

// SlotFailover forces a replication slot over to another competing relay:
// it cuts the PostgreSQL link of the instance holding the slot for the
// window (its walsender ends, the slot is free, another relay takes it
// and re-streams from the confirmed position), then restores it (the old
// holder comes back as one waiting). Only for slots two or more instances
// compete for. The journal says who held it before and who took it over.
type SlotFailover struct{}

func init() { Register(func() Kind { return &SlotFailover{} }) }

// Name implements Kind.
func (*SlotFailover) Name() string { return "slot-failover" }

// Doc implements Kind.
func (*SlotFailover) Doc() string {
	return "cuts the PostgreSQL link of the relay holding a replication slot for the window, so a competing relay takes it over"
}

// Validate implements Kind.
func (*SlotFailover) Validate() error { return nil }

// Draw implements Kind: a slot two or more instances compete for.
func (*SlotFailover) Draw(t *rapid.T, a Aim) (string, bool) {
	return drawSlot(a, 2, func(xs []string) string { return Pick(t, xs, "slot") })
}

// Apply implements Kind.
func (*SlotFailover) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
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
	name := v.Holder + "→postgres"
	l, err := s.Link(name)
	if err != nil {
		return Effect{}, err
	}
	out, err := l.Down(f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out, "link": name, "instance": v.Holder, "slot": v.describe()},
		Undo: func(ctx context.Context) (map[string]string, error) {
			d := map[string]string{"link": name}
			if now, err := sl.Slot(ctx, f.Target); err != nil {
				d["slot_error"] = err.Error()
			} else {
				d["slot"] = now.describe()
				switch {
				case now.Holder != "" && now.Holder != v.Holder:
					d["taken_over_by"] = now.Holder
				default:
					d["taken_over_by"] = "nobody yet"
				}
			}
			out, err := l.Up(f.ID)
			d["effect"] = out
			return d, err
		},
	}, nil
}
