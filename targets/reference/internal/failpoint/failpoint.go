// Package failpoint implements the reference target's named crash points.
//
// A failpoint is a call to Inject(name) placed where a crash (or an error,
// or a stall) matters for correctness: between a broker ack and the mark in
// the relay, between a world effect and the local commit in a consumer, and
// so on. The harness arms points through SAGACHAOS_FAILPOINTS
// ("name=crash@3;other=sleep(2s);x=error") and learns which points were
// reached through SAGACHAOS_FAILPOINT_LOG (one JSON line per point the first
// time it is reached, one per firing). A point may be listed more than once
// ("p=crash@3;p=crash@6"): each entry fires on its own hit.
//
// A marker (Kind "marker") is a reachability assertion on a branch of the
// saga (a step timing out in a given state, a decline after a timeout, a
// redelivered message, a compensation re-sent …), like Antithesis's
// Reachable: the code calls Reached(name) on the branch, which writes a
// line to the log the first time and then at most one line per
// markerEvery while the branch keeps being taken, with the hit count so
// far. A marker cannot be armed. The harness reports which branches were
// reached while a fault was active (the branch × fault matrix) and can aim
// a fault at the moment a branch is taken.
//
// When nothing is armed and no log is configured, Inject and Reached cost
// one atomic load, so the points can stay in production code paths.
package failpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrInjected is returned by Inject for an armed "error" action, so the
// caller fails exactly as if its I/O had failed.
var ErrInjected = errors.New("failpoint: injected error")

// Point is one entry of the catalogue: a name the code calls Inject with.
type Point struct {
	Name        string `json:"name"`
	Component   string `json:"component"`
	Description string `json:"description"`
	// Kind is "" for a failpoint (Inject: can be armed) or KindMarker.
	Kind string `json:"kind,omitempty"`
}

// KindMarker is the Kind of a reachability marker.
const KindMarker = "marker"

// markerEvery thins a marker's log lines: after the first, at most one
// line per interval while the branch keeps being taken.
const markerEvery = 250 * time.Millisecond

// Catalogue lists every failpoint the reference target declares. The
// harness reads it through `reftarget --list-failpoints`; a name not listed
// here cannot be armed.
var Catalogue = []Point{
	{"relay.after-select", "relay", "rows selected and locked FOR UPDATE, nothing produced yet", ""},
	{"relay.after-publish", "relay", "broker acknowledged the batch, rows not yet marked published", ""},
	{"relay.after-mark", "relay", "rows marked published and committed", ""},
	{"relay.before-cleanup", "relay", "retention cleanup about to delete old published rows", ""},
	{"orders.after-create", "orders", "order, saga state and first command committed, HTTP reply not yet sent", ""},
	{"orders.after-state-save", "orders", "saga state saved with its next command in the outbox, reply offset not yet committed", ""},
	{"orders.after-timeout-save", "orders", "step timeout handled and saved, nothing else done", ""},
	{"orders.after-email", "orders", "mailer accepted the confirmation e-mail, order not yet APPROVED locally", ""},
	{"inventory.after-apply-before-commit", "inventory", "stock changed inside the transaction, not yet committed", ""},
	{"inventory.after-commit", "inventory", "stock change committed, offset not yet committed", ""},
	{"payment.after-charge", "payment", "gateway charged (or declined), local result not yet committed", ""},
	{"payment.after-commit", "payment", "payment result committed, offset not yet committed", ""},
	{"delivery.after-ship", "delivery", "carrier booked the shipment, local record not yet committed", ""},
	{"delivery.after-commit", "delivery", "shipment record committed, offset not yet committed", ""},

	// Markers: the saga's branches (Reached), one per way a step can go.
	marker("orders.timeout.reserving", "orders", "RESERVING timed out: stock is released (with a tombstone if it was never reserved)"),
	marker("orders.timeout.charging", "orders", "CHARGING timed out: CancelCharge sent (the charge may have happened)"),
	marker("orders.timeout.cancelling-charge", "orders", "CANCELLING_CHARGE timed out: CancelCharge re-sent (a compensation retried)"),
	marker("orders.timeout.releasing", "orders", "RELEASING timed out: ReleaseStock re-sent (a compensation retried)"),
	marker("orders.timeout.delivering", "orders", "DELIVERING timed out: ScheduleDelivery re-sent (a retriable step after the pivot)"),
	marker("orders.out-of-stock", "orders", "StockReserveFailed: the order is cancelled without compensation"),
	marker("orders.declined", "orders", "PaymentDeclined while CHARGING: stock released"),
	marker("orders.declined-after-timeout", "orders", "PaymentDeclined or PaymentCancelled while CANCELLING_CHARGE: a decline after a timeout"),
	marker("orders.charged-after-timeout", "orders", "PaymentCharged while CANCELLING_CHARGE: the charge won, the saga goes forward"),
	marker("orders.release-unreserved", "orders", "StockNotReserved while RELEASING: nothing was held"),
	marker("orders.late-reply", "orders", "a reply for a saga that moved on, ignored"),
	marker("orders.replayed-create", "orders", "POST /orders answered from the idempotency key (a repeat or a concurrent duplicate)"),
	marker("orders.email-retry", "orders", "a confirmation e-mail call failed or timed out: asked again with its key"),
	marker("orders.redelivered", "orders", "a reply already applied (inbox) arrived again"),
	marker("inventory.out-of-stock", "inventory", "a reservation refused: not enough stock"),
	marker("inventory.release-again", "inventory", "ReleaseStock for a released order: answered again, nothing changed"),
	marker("inventory.release-unreserved", "inventory", "ReleaseStock for a failed reservation: answered not reserved"),
	marker("inventory.redelivered", "inventory", "a command already applied (inbox) arrived again"),
	marker("payment.declined", "payment", "the gateway declined the card"),
	marker("payment.gateway-unknown", "payment", "a gateway call failed or timed out: asked again with its key"),
	marker("payment.cancel-decided", "payment", "CancelCharge for an order already decided: the decision is answered again"),
	marker("payment.redelivered", "payment", "a command already applied (inbox) arrived again"),
	marker("delivery.carrier-unknown", "delivery", "a carrier call failed or timed out: asked again with its key"),
	marker("delivery.already-booked", "delivery", "ScheduleDelivery for a booked order (re-sent after a timeout): answered from the local record"),
	marker("delivery.redelivered", "delivery", "a command already applied (inbox) arrived again"),
	marker("relay.mark-failed", "relay", "the broker acked a batch but marking it failed (an error, a lost database): it is published again (duplicates)"),
	marker("relay.aggregate-skipped", "relay", "an aggregate's lock was held by another relay: skipped this poll"),
}

func marker(name, component, description string) Point {
	return Point{Name: name, Component: component, Description: description, Kind: KindMarker}
}

type action struct {
	kind  string // crash, error, sleep
	sleep time.Duration
	nth   int64 // fire on this hit only
}

type point struct {
	marker  bool
	hits    atomic.Int64
	reached atomic.Bool
	// last is when a marker last wrote a line (unix nanoseconds).
	last atomic.Int64
	// acts are the armed actions, in the order SAGACHAOS_FAILPOINTS lists
	// them: a point may be armed more than once (two faults on one point,
	// each on its own hit); on a hit the first action for it fires.
	acts []*action
}

var (
	active   atomic.Bool // anything armed or logging: the only load when off
	points   = map[string]*point{}
	logMu    sync.Mutex
	logFile  *os.File
	instance string
)

func init() {
	for _, p := range Catalogue {
		points[p.Name] = &point{marker: p.Kind == KindMarker}
	}
}

// Known reports whether name is in the catalogue.
func Known(name string) bool { _, ok := points[name]; return ok }

// Setup arms the failpoints in spec (the SAGACHAOS_FAILPOINTS format) and
// opens logPath for the coverage log (empty: no log). It is called once at
// process start, before any Inject.
func Setup(spec, logPath, inst string) error {
	instance = inst
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, actStr, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("failpoint %q: want name=action[@N]", part)
		}
		name = strings.TrimSpace(name)
		p, known := points[name]
		if !known {
			return fmt.Errorf("unknown failpoint %q (see --list-failpoints)", name)
		}
		if p.marker {
			return fmt.Errorf("%s is a marker (a branch the code reports reaching), not a failpoint: it cannot be armed", name)
		}
		a, err := parseAction(strings.TrimSpace(actStr))
		if err != nil {
			return fmt.Errorf("failpoint %s: %w", name, err)
		}
		p.acts = append(p.acts, a)
		active.Store(true)
	}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open failpoint log: %w", err)
		}
		logFile = f
		active.Store(true)
	}
	return nil
}

func parseAction(s string) (*action, error) {
	a := &action{nth: 1}
	if body, n, ok := strings.Cut(s, "@"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("bad hit count %q (want @N, N ≥ 1)", n)
		}
		a.nth = v
		s = body
	}
	switch {
	case s == "crash" || s == "error":
		a.kind = s
	case strings.HasPrefix(s, "sleep(") && strings.HasSuffix(s, ")"):
		d, err := time.ParseDuration(s[len("sleep(") : len(s)-1])
		if err != nil {
			return nil, fmt.Errorf("bad sleep duration: %w", err)
		}
		a.kind, a.sleep = "sleep", d
	default:
		return nil, fmt.Errorf("unknown action %q (want crash, error or sleep(DURATION))", s)
	}
	return a, nil
}

// Inject marks that the code reached the named point and, if it is armed
// for this hit, performs its action: crash never returns, sleep returns
// nil after sleeping, error returns ErrInjected.
func Inject(name string) error {
	if !active.Load() {
		return nil
	}
	p := points[name]
	if p == nil || p.marker {
		panic("failpoint: Inject of undeclared point " + name)
	}
	hit := p.hits.Add(1)
	if p.reached.CompareAndSwap(false, true) {
		writeLog(name, hit, "")
	}
	var a *action
	for _, x := range p.acts {
		if x.nth == hit {
			a = x
			break
		}
	}
	if a == nil {
		return nil
	}
	writeLog(name, hit, a.kind)
	switch a.kind {
	case "crash":
		fmt.Fprintf(os.Stderr, "failpoint %s: crash at hit %d\n", name, hit)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it
	case "sleep":
		time.Sleep(a.sleep)
		return nil
	default:
		return fmt.Errorf("%s (hit %d): %w", name, hit, ErrInjected)
	}
}

// Reached reports that the code took the branch of the named marker: the
// first time in the process's life, and then at most once per
// markerEvery, it appends a line with the hit count so far.
func Reached(name string) {
	if !active.Load() {
		return
	}
	p := points[name]
	if p == nil || !p.marker {
		panic("failpoint: Reached of undeclared marker " + name)
	}
	hit := p.hits.Add(1)
	now := time.Now().UnixNano()
	last := p.last.Load()
	if hit > 1 && now-last < int64(markerEvery) {
		return
	}
	if !p.last.CompareAndSwap(last, now) {
		return // another goroutine logged it just now
	}
	writeLog(name, hit, "")
}

type logLine struct {
	Instance  string `json:"instance"`
	Failpoint string `json:"failpoint"`
	Hit       int64  `json:"hit"`
	Action    string `json:"action,omitempty"`
}

// writeLog appends one line with a single write(2), so a crash right after
// still leaves it on disk.
func writeLog(name string, hit int64, act string) {
	if logFile == nil {
		return
	}
	b, _ := json.Marshal(logLine{Instance: instance, Failpoint: name, Hit: hit, Action: act})
	logMu.Lock()
	_, _ = logFile.Write(append(b, '\n'))
	logMu.Unlock()
}

// Names returns the catalogue's names, sorted.
func Names() []string {
	out := make([]string, 0, len(points))
	for n := range points {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Reset disarms every point and zeroes its counters, so an in-process test
// can arm a fresh set with Setup.
func Reset() {
	active.Store(false)
	for _, p := range points {
		p.hits.Store(0)
		p.reached.Store(false)
		p.last.Store(0)
		p.acts = nil
	}
	logMu.Lock()
	if logFile != nil {
		logFile.Close()
		logFile = nil
	}
	logMu.Unlock()
}
