package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The CDC kinds (slot-kill, slot-db-crash, slot-stall, slot-failover) aim
// at a logical replication slot a process declares (manifest
// processes[].slots): their target is the slot's database, and when they
// apply they ask the System who holds that slot now, so they work for any
// CDC target and never name an instance of the reference.

// SlotSystem is the optional capability of a System that can see the
// target's replication slots (found by type assertion, as toxiproxy finds a
// toxic's extra capabilities).
type SlotSystem interface {
	Slots() (Slots, error)
}

// Slots reads the declared slots.
type Slots interface {
	// Slot is the state of the slot of database db now.
	Slot(ctx context.Context, db string) (SlotView, error)
	// Instances are the instances competing for db's slot (the instances
	// of the process that declares it), in declaration order.
	Instances(db string) []string
}

// SlotView is one slot as a fault sees it.
type SlotView struct {
	DB, Name     string
	Exists       bool
	Active       bool
	Holder       string // the holding instance; "" when none (or unnamed)
	PID          int
	ConfirmedLSN string
	CurrentLSN   string
	LagBytes     int64
}

// SlotAim is one declared slot a fault can aim at.
type SlotAim struct {
	// DB is the slot's database (a fault's target).
	DB string
	// Instances compete for it (filtered by the scenario's components).
	Instances []string
}

func slotsOf(s System) (Slots, error) {
	ss, ok := s.(SlotSystem)
	if !ok {
		return nil, errors.New("this run cannot see replication slots")
	}
	return ss.Slots()
}

// drawSlot picks one of the run's slots, or reports that there is none
// (a target without CDC relays).
func drawSlot(a Aim, minInstances int, pick func([]string) string) (string, bool) {
	var dbs []string
	for _, s := range a.Slots {
		if len(s.Instances) >= minInstances {
			dbs = append(dbs, s.DB)
		}
	}
	if len(dbs) == 0 {
		return "", false
	}
	return pick(dbs), true
}

// holderWait bounds how long a kind waits for a slot to be held (a relay
// starting, or taking over after a fault) before it gives up.
const holderWait = 3 * time.Second

// waitHeld polls db's slot until an instance holds it and ok(v) says the
// moment is right, at most holderWait; it returns the last view and
// whether it was held.
func waitHeld(ctx context.Context, sl Slots, db string, ok func(SlotView) bool) (SlotView, bool, error) {
	deadline := time.Now().Add(holderWait)
	var v SlotView
	var err error
	for {
		v, err = sl.Slot(ctx, db)
		if err == nil && v.Active && v.Holder != "" && (ok == nil || ok(v)) {
			return v, true, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil && v.Active && v.Holder != "" {
				return v, true, nil // held, though not at the moment ok wanted
			}
			return v, false, err
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// describe is a journal detail of a view.
func (v SlotView) describe() string {
	switch {
	case !v.Exists:
		return "no slot"
	case !v.Active:
		return fmt.Sprintf("%s free, confirmed %s, lag %d bytes", v.Name, v.ConfirmedLSN, v.LagBytes)
	case v.Holder == "":
		return fmt.Sprintf("%s held by pid %d (no instance), confirmed %s, lag %d bytes", v.Name, v.PID, v.ConfirmedLSN, v.LagBytes)
	}
	return fmt.Sprintf("%s held by %s (pid %d), confirmed %s, lag %d bytes", v.Name, v.Holder, v.PID, v.ConfirmedLSN, v.LagBytes)
}

// ParseLSN reads a PostgreSQL WAL position ("16/B374D848").
func ParseLSN(s string) (uint64, bool) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, false
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return h<<32 | l, true
}
