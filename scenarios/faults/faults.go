// Package faults is the catalogue of fault kinds (DESIGN §6), with
// toxiproxy's toxics as the model: each kind is one file in this package,
// holding its typed parameters (a struct with JSON tags) with their
// defaults and validation, how the generator draws a fault of it, how it is
// applied to a running system and undone, and what it journals. A kind
// registers itself by name in init; the generator, the scenario loader, the
// nemesis and `sagachaos list faults` iterate the registry, and nothing
// else names a kind. docs/adding-a-fault.md walks through adding one.
//
// A kind acts on the running system only through the small interfaces of
// System, which the nemesis implements. They make overlapping faults on one
// resource compose: the first fault that cuts a link, stops or pauses a
// component or crashes PostgreSQL takes it down, the last one to end brings
// it back, and each call reports what it really did, so the journal records
// what took effect rather than what was attempted.
package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"pgregory.net/rapid"
)

// Kind is one fault kind and, as a value, the parameters of one fault of
// that kind: New returns a pointer to the kind's parameter struct holding
// its defaults; the JSON tags of its exported fields name the parameters
// (a `doc` tag describes each one for `sagachaos list faults`).
type Kind interface {
	// Name is the kind as scenario files spell it ("link-down").
	Name() string
	// Doc is a one-line description.
	Doc() string
	// Validate reports the first bad parameter as a *ParamError.
	Validate() error
	// Draw aims a fault of this kind at a drawn run and draws its
	// parameters into the receiver (which holds the defaults). It returns
	// the fault's target (a link, an instance, a failpoint; "" for a kind
	// without one) and false when the run offers nothing to aim it at. The
	// draws are part of every seed's scenario: changing them changes what
	// each seed generates.
	Draw(t *rapid.T, a Aim) (target string, ok bool)
	// Apply makes the fault take effect on s. The returned Effect says what
	// took effect and how to undo it. An error means nothing took effect
	// (an Apply that did part of its work undoes it before returning).
	Apply(ctx context.Context, s System, f Fault) (Effect, error)
}

// Fault is the part of a planned fault every kind sees when it is applied.
type Fault struct {
	// ID is the fault's id in the plan ("f3"); it names the fault's holds
	// on shared resources and its toxics.
	ID string
	// Target is what Draw returned.
	Target string
	// Duration is the planned window.
	Duration time.Duration
}

// Effect is what an Apply did.
type Effect struct {
	// Detail is journaled with the start op (or the instant op): what took
	// effect, under "effect", and any facts a replay should compare.
	Detail map[string]string
	// Undo ends the fault and returns what it did, journaled with the end
	// op. Nil: the fault is instant (one op, nothing to undo). Undo gets a
	// context that is cancelled a couple of seconds after the run is
	// interrupted: it must return promptly then, leaving nothing stopped
	// that the harness's cleanup would not kill anyway.
	Undo func(ctx context.Context) (map[string]string, error)
	// Immediate undoes the fault as soon as it was applied, without
	// waiting for its window (a fault whose effect is the apply and undo
	// pair, such as a rewind: stop, rewind, start).
	Immediate bool
}

// StartArmed is implemented by kinds armed in a component's environment
// before it starts (failpoints): Arm names the instance and the entry of
// its SAGACHAOS_FAILPOINTS ("name=action@hit"). The target stage arms
// them; their Apply only confirms the arming and journals it.
type StartArmed interface {
	Arm(f Fault) (instance, failpoint, action string, hit int)
}

var (
	regMu    sync.RWMutex
	registry = map[string]func() Kind{}
)

// Register adds a kind: newKind returns a fresh value holding the kind's
// defaults. It panics on a duplicate or empty name (a programming error,
// found by every test).
func Register(newKind func() Kind) {
	name := newKind().Name()
	regMu.Lock()
	defer regMu.Unlock()
	if name == "" || registry[name] != nil {
		panic(fmt.Sprintf("faults: kind %q registered twice or without a name", name))
	}
	registry[name] = newKind
}

// New returns a fresh value of the named kind holding its defaults.
func New(name string) (Kind, error) {
	regMu.RLock()
	f := registry[name]
	regMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("unknown fault kind %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(), nil
}

// Names lists every registered kind, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Kinds returns the defaults of every registered kind, sorted by name.
func Kinds() []Kind {
	var out []Kind
	for _, n := range Names() {
		k, _ := New(n)
		out = append(out, k)
	}
	return out
}

// Aim is what a drawn run offers a fault to aim at, already filtered by the
// scenario's patterns.
type Aim struct {
	// Links are the proxied links ("relay-1→kafka").
	Links []string
	// Components are the component instances.
	Components []string
	// Consumers are the instances of processes that declare consumer groups
	// (manifest consumes): what a rewind can aim at.
	Consumers []string
	// Failpoints are the declared failpoints with the instances of the
	// process that owns each.
	Failpoints []FailpointAim
	// Ambiguous are the world actions ("provider/action") that declare
	// the nemesis may make them ambiguous.
	Ambiguous []string
	// Slots are the declared replication slots (manifest
	// processes[].slots) with the instances competing for each (slots.go).
	Slots []SlotAim
}

// FailpointAim is one declared failpoint and its process's instances.
type FailpointAim struct {
	Name      string
	Instances []string
}

// Pick draws one of xs.
func Pick(t *rapid.T, xs []string, label string) string {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}

// exampleAim offers one of everything, so any kind can draw.
var exampleAim = Aim{
	Links:      []string{"component→dependency"},
	Components: []string{"component"},
	Consumers:  []string{"component"},
	Failpoints: []FailpointAim{{Name: "component.point", Instances: []string{"component"}}},
	Ambiguous:  []string{"provider/action"},
	Slots:      []SlotAim{{DB: "database", Instances: []string{"component", "component-2"}}},
}

// Example draws a fault of the named kind for a run that offers one of
// everything (the smallest draw rapid makes): the defaults of every
// parameter the kind does not draw and a valid value of every one it does,
// and the target it aims at (a link "component→dependency", an instance
// "component", a failpoint "component.point").
func Example(name string) (k Kind, target string, err error) {
	if _, err := New(name); err != nil {
		return nil, "", err
	}
	var drew bool
	rapid.Custom(func(t *rapid.T) bool {
		rapid.Bool().Draw(t, "example") // rapid wants every generator to draw
		k, _ = New(name)
		target, drew = k.Draw(t, exampleAim)
		return drew
	}).Example(0)
	if !drew {
		return nil, "", fmt.Errorf("fault kind %s draws nothing for a run that offers one of everything", name)
	}
	return k, target, nil
}
