package faults

import (
	"context"
	"fmt"
	"strconv"

	"pgregory.net/rapid"
)

// SlotDBCrash SIGKILLs the PostgreSQL postmaster while a relay streams a
// replication slot — at a moment the slot is held, with WAL not yet
// confirmed when there is some — and restarts it (crash recovery) when the
// window ends. A slot's confirmed position is saved at checkpoints, so it
// may come back behind where the relay had confirmed it: the relay then
// re-streams (duplicates are legal, loss is not). The journal says where
// the position was before the crash and after the restart.
type SlotDBCrash struct{}

func init() { Register(func() Kind { return &SlotDBCrash{} }) }

// Name implements Kind.
func (*SlotDBCrash) Name() string { return "slot-db-crash" }

// Doc implements Kind.
func (*SlotDBCrash) Doc() string {
	return "SIGKILLs PostgreSQL while a relay streams a replication slot, restarts it when the window ends"
}

// Validate implements Kind.
func (*SlotDBCrash) Validate() error { return nil }

// Draw implements Kind: a declared slot.
func (*SlotDBCrash) Draw(t *rapid.T, a Aim) (string, bool) {
	return drawSlot(a, 1, func(xs []string) string { return Pick(t, xs, "slot") })
}

// Apply implements Kind.
func (*SlotDBCrash) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	sl, err := slotsOf(s)
	if err != nil {
		return Effect{}, err
	}
	pg, err := s.Postgres()
	if err != nil {
		return Effect{}, err
	}
	// Streaming: held, and ideally with something in flight.
	v, held, err := waitHeld(ctx, sl, f.Target, func(v SlotView) bool { return v.LagBytes > 0 })
	if err != nil {
		return Effect{}, err
	}
	if !held {
		return Effect{}, fmt.Errorf("slot of %s: nobody streamed it within %v (%s)", f.Target, holderWait, v.describe())
	}
	out, err := pg.Crash(ctx, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out, "slot": v.describe(), "confirmed_before": v.ConfirmedLSN},
		Undo: func(ctx context.Context) (map[string]string, error) {
			out, err := pg.Restart(ctx, f.ID)
			d := map[string]string{"action": "restart", "effect": out}
			if err != nil {
				return d, err
			}
			if now, err := sl.Slot(ctx, f.Target); err != nil {
				d["slot_error"] = err.Error()
			} else {
				d["slot"] = now.describe()
				d["confirmed_after"] = now.ConfirmedLSN
				b, ok1 := ParseLSN(v.ConfirmedLSN)
				a, ok2 := ParseLSN(now.ConfirmedLSN)
				if ok1 && ok2 && a < b {
					d["moved_back_bytes"] = strconv.FormatUint(b-a, 10)
				}
			}
			return d, nil
		},
	}, nil
}
