package scenarios

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fuzzCatalog is the reference target's shape, enough for every fault kind
// to find a target.
var fuzzCatalog = Catalog{
	APIProcess: "orders",
	Processes: []Process{
		{Name: "orders", Depends: []string{"postgres", "kafka", "mailer"}, Replicas: 1},
		{Name: "inventory", Role: "consumer", Depends: []string{"postgres", "kafka"}, Replicas: 1},
		{Name: "payment", Role: "consumer", Depends: []string{"postgres", "kafka", "gateway"}, Replicas: 1},
		{Name: "relay", Role: "relay", Depends: []string{"postgres", "kafka"}, Replicas: 2},
	},
	Failpoints: []FailpointRef{{Name: "relay.after-publish", Component: "relay"}, {Name: "orders.before-commit", Component: "orders"}},
}

// FuzzParseSpec: a scenario file is untrusted input. ParseSpec never
// panics; what it accepts survives a round trip through JSON unchanged; and
// a small accepted spec generates a scenario without panicking, within its
// own ranges. Regression cases: testdata/fuzz/FuzzParseSpec/.
func FuzzParseSpec(f *testing.F) {
	for _, n := range Names() {
		b, err := namedFS.ReadFile("named/" + n + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(1))
	}
	f.Add([]byte(`{"name":"x","orders":{"min":1,"max":1},"clients":{"min":1,"max":1},"skus":{"min":1,"max":1},"stock":{"min":0,"max":0},"qty":{"min":1,"max":1},"lines":{"min":1,"max":1},"gap_ms":{"min":0,"max":0},"relays":{"min":1,"max":1},"faults":{"count":{"min":0,"max":0},"duration_ms":{"min":0,"max":0}},"limits":{"time_limit":"1s","quiesce":"1s","client_timeout":"1s"}}`), uint64(7))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		s, err := ParseSpec("fuzz.json", b)
		if err != nil {
			if s != nil {
				t.Fatalf("error %v with a spec", err)
			}
			return
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal an accepted spec: %v", err)
		}
		s2, err := ParseSpec("again.json", again)
		if err != nil {
			t.Fatalf("an accepted spec does not parse again: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, s2)
		}
		if s.Sagas.Max > MaxOrders || s.Relays.Max > 64 || s.Faults.Count.Max > 10_000 {
			t.Fatalf("accepted a spec no run can honour: %+v", s)
		}
		// Generating a big spec is slow, not wrong: keep the executions
		// quick (ParseSpec bounds what a spec may ask for).
		if s.Sagas.Max > 50 || s.Faults.Count.Max > 50 || s.Relays.Max > 8 {
			return
		}
		sc, err := Generate(s, seed, fuzzCatalog)
		if err != nil {
			return // a pattern naming nothing the catalogue has
		}
		if n := len(sc.Workload.Sagas); n < s.Sagas.Min || n > s.Sagas.Max {
			t.Fatalf("%d sagas outside [%d, %d]", n, s.Sagas.Min, s.Sagas.Max)
		}
		if len(sc.Faults) > s.Faults.Count.Max {
			t.Fatalf("%d faults, at most %d", len(sc.Faults), s.Faults.Count.Max)
		}
		if _, err := json.Marshal(sc); err != nil {
			t.Fatalf("marshal the scenario: %v", err)
		}
	})
}
