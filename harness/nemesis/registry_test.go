package nemesis

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// instantKinds are the kinds with nothing to undo: one journal op each.
// Every other kind must undo what it applied.
var instantKinds = map[string]bool{"failpoint": true, "gateway-ambiguous": true}

type fakeRewinder struct{ groups []string }

func (r *fakeRewinder) Rewind(_ context.Context, groups []string) (string, error) {
	r.groups = groups
	return strings.Join(groups, ","), nil
}

// TestEveryKindHasAllItsParts: every registered kind draws a fault (a
// target and valid parameters), survives scenario.json, is applied by the
// nemesis on a real environment, is undone, and journals what took effect.
func TestEveryKindHasAllItsParts(t *testing.T) {
	ctx := context.Background()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"orders"}, Topics: []env.Topic{{Name: "orders", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	// faults.Example aims at one of everything under these names.
	if _, err := e.NewLink("component→dependency", srv.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	// The CDC kinds act on the slot holder's own PostgreSQL link.
	if _, err := e.PostgresLink("component"); err != nil {
		t.Fatal(err)
	}
	tg := &fakeTarget{armed: map[string]string{}}
	rw := &fakeRewinder{}
	rec, _ := models.NewRecorder(nil, models.Header{})
	n := &Nemesis{Rec: rec, Env: e, Target: tg, World: &fakeWorld{}, Rewinder: rw, Slots: &fakeSlots{}}

	names := faults.Names()
	if len(names) < 15 {
		t.Fatalf("only %d kinds registered: %v", len(names), names)
	}
	var plan []scenarios.Fault
	for i, name := range names {
		k, target, err := faults.Example(name)
		if err != nil {
			t.Fatalf("%s: no generator: %v", name, err)
		}
		if err := k.Validate(); err != nil {
			t.Errorf("%s: the generator drew parameters its validation refuses: %v", name, err)
		}
		if k.Doc() == "" {
			t.Errorf("%s: no description for sagachaos list faults", name)
		}
		for _, p := range faults.Params(k) {
			if p.Doc == "" {
				t.Errorf("%s: parameter %s has no doc tag", name, p.Name)
			}
		}
		id := "f" + string(rune('a'+i))
		f := scenarios.Fault{ID: id, Kind: name, Target: target, Duration: scenarios.Duration(20 * time.Millisecond), Params: k}
		if sa, ok := k.(faults.StartArmed); ok {
			inst, _, _, _ := sa.Arm(f.View())
			tg.armed[id] = inst
		}
		// scenario.json round trip: the replay reads back this very fault.
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var back scenarios.Fault
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %s does not read back: %v", name, b, err)
		}
		if !reflect.DeepEqual(back, f) {
			t.Errorf("%s: scenario.json round trip changed the fault:\n%+v\n%+v", name, f, back)
		}
		plan = append(plan, f)
	}
	heal := make(chan struct{})
	n.Run(ctx, plan, func(int) <-chan struct{} { c := make(chan struct{}); close(c); return c }, make(chan struct{}), heal)

	journal := map[string][]models.FaultRecord{}
	for _, op := range rec.Ops() {
		var fr models.FaultRecord
		if op.Proc != models.ProcNemesis || op.Decode(&fr) != nil {
			continue
		}
		journal[fr.Kind] = append(journal[fr.Kind], fr)
	}
	for _, name := range names {
		got := journal[name]
		var phases []string
		for _, fr := range got {
			phases = append(phases, fr.Phase)
			if fr.Error != "" {
				t.Errorf("%s: %s failed: %s", name, fr.Phase, fr.Error)
			}
		}
		want := []string{models.PhaseStart, models.PhaseEnd}
		if instantKinds[name] {
			want = []string{models.PhaseInstant}
		}
		if !reflect.DeepEqual(phases, want) {
			t.Errorf("%s journaled phases %v, want %v (a kind with nothing to undo belongs in instantKinds)", name, phases, want)
			continue
		}
		if got[0].Detail["effect"] == "" {
			t.Errorf("%s: the journal does not say what took effect: %v", name, got[0].Detail)
		}
	}
	if calls := strings.Join(tg.calls, ";"); !strings.Contains(calls, "stop component") || !strings.Contains(calls, "pause component") {
		t.Errorf("component calls %v", tg.calls)
	}
	if len(rw.groups) == 0 {
		t.Error("rewind rewound no group")
	}
	for _, l := range e.Links() {
		if !l.Enabled() {
			t.Errorf("link %s left down", l.Name())
		}
	}
}

// TestRegistryNames: the names are sorted and unique, each a kind of its own.
func TestRegistryNames(t *testing.T) {
	names := faults.Names()
	if !sort.StringsAreSorted(names) {
		t.Errorf("names not sorted: %v", names)
	}
	seen := map[reflect.Type]string{}
	for _, n := range names {
		k, _ := faults.New(n)
		if k.Name() != n {
			t.Errorf("kind registered as %s calls itself %s", n, k.Name())
		}
		if other, dup := seen[reflect.TypeOf(k)]; dup {
			t.Errorf("%s and %s share one type", n, other)
		}
		seen[reflect.TypeOf(k)] = n
	}
}
