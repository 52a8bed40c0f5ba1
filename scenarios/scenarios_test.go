package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/targets"
)

var testCatalog = Catalog{
	APIProcess: "orders",
	Processes: []Process{
		{Name: "orders", Role: "api", Depends: []string{"postgres", "kafka", "mailer"}, Consumes: true,
			Types: []string{"StockReserved", "StockReserveFailed", "StockReleased", "PaymentCharged", "PaymentDeclined", "DeliveryScheduled"}},
		{Name: "inventory", Role: "consumer", Depends: []string{"postgres", "kafka"}, Consumes: true, Types: []string{"ReserveStock", "ReleaseStock"}},
		{Name: "payment", Role: "consumer", Depends: []string{"postgres", "kafka", "gateway"}, Consumes: true, Types: []string{"ChargePayment", "CancelCharge"}},
		{Name: "delivery", Role: "consumer", Depends: []string{"postgres", "kafka", "carrier"}, Consumes: true, Types: []string{"ScheduleDelivery"}},
		{Name: "relay", Role: "relay", Depends: []string{"postgres", "kafka"}, Replicas: 2},
	},
	Saga:      targets.OrderDomain().Saga,
	Domain:    orderDomain(),
	Ambiguous: []string{"gateway/charge"},
	Failpoints: []FailpointRef{
		{Name: "relay.after-select", Component: "relay"}, {Name: "relay.after-publish", Component: "relay"}, {Name: "relay.after-mark", Component: "relay"},
		{Name: "inventory.after-apply", Component: "inventory"}, {Name: "payment.after-charge", Component: "payment"},
		{Name: "delivery.after-ship", Component: "delivery"}, {Name: "orders.after-state-save", Component: "orders"},
		{Name: "orders.timeout.charging", Component: "orders", Kind: "marker"}, {Name: "inventory.redelivered", Component: "inventory", Kind: "marker"},
	},
}

func orderDomain() *Domain {
	d := targets.OrderDomain()
	dom, err := NewDomain(d.Workload, d.Resources)
	if err != nil {
		panic(err)
	}
	return dom
}

func TestNamedScenariosGenerate(t *testing.T) {
	names := Names()
	if len(names) < 11 {
		t.Fatalf("only %d named scenarios: %v", len(names), names)
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			s, err := Load(n)
			if err != nil {
				t.Fatal(err)
			}
			a, err := Generate(s, 7, testCatalog)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Generate(s, 7, testCatalog)
			if !reflect.DeepEqual(a, b) {
				t.Fatal("same seed gave two different scenarios")
			}
			if len(a.Workload.Sagas) < s.Sagas.Min || len(a.Workload.Sagas) > s.Sagas.Max {
				t.Fatalf("%d sagas outside %v", len(a.Workload.Sagas), s.Sagas)
			}
			if len(a.Faults) > s.Faults.Count.Max {
				t.Fatalf("%d faults, max %d", len(a.Faults), s.Faults.Count.Max)
			}
			for _, f := range a.Faults {
				if !matchAny(s.Faults.Kinds, f.Kind) {
					t.Fatalf("fault kind %q not allowed by %v", f.Kind, s.Faults.Kinds)
				}
			}
			// scenario.json round trip: a replay reads back exactly this.
			raw, _ := json.Marshal(a)
			var back Scenario
			if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(a, back) {
				t.Fatalf("scenario.json round trip: %v", err)
			}
		})
	}
}

func TestSeedsDiffer(t *testing.T) {
	s, _ := Load("everything")
	a, _ := Generate(s, 1, testCatalog)
	b, _ := Generate(s, 2, testCatalog)
	if reflect.DeepEqual(a.Workload, b.Workload) && reflect.DeepEqual(a.Faults, b.Faults) {
		t.Fatal("seeds 1 and 2 gave the same scenario")
	}
}

func TestEverythingCoversFaultKinds(t *testing.T) {
	s, _ := Load("everything")
	seen := map[string]bool{}
	// A target with CDC relays (replication slots) offers every kind a
	// target; the CDC kinds find nothing to aim at on testCatalog's.
	cat := testCatalog
	cat.Slots = []SlotRef{{DB: "orders", Process: "relay"}, {DB: "inventory", Process: "relay"}}
	for seed := uint64(1); seed <= 60; seed++ {
		sc, err := Generate(s, seed, cat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sc.Faults {
			seen[f.Kind] = true
		}
	}
	for _, k := range s.Faults.Kinds {
		if !seen[k] {
			t.Errorf("fault kind %s never drawn in 60 seeds", k)
		}
	}
}

func TestBrokenSpecs(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"syntax", `{"name": `, "malformed JSON"},
		{"unknown field", `{"name":"x","ordres":{}}`, "field ordres: unknown field"},
		{"wrong type", `{"name":"x","sagas":"many"}`, "field sagas: want"},
		{"range", `{"name":"x","sagas":{"min":10,"max":5}}`, "field sagas: max 5 is below min 10"},
		{"older name", `{"name":"x","orders":{"min":10,"max":5}}`, "field sagas: max 5 is below min 10"},
		{"param", `{"name":"x","sagas":{"min":1,"max":1},"clients":{"min":1,"max":1},"relays":{"min":1,"max":1},"params":{"qty":{"min":3,"max":1}}}`, "field params.qty: max 1 is below min 3"},
		{"rate", `{"name":"x","sagas":{"min":1,"max":1},"clients":{"min":1,"max":1},"relays":{"min":1,"max":1},"decline_rate":2}`, "field decline_rate: 2 is not a probability"},
		{"kind", `{"name":"x","sagas":{"min":1,"max":1},"clients":{"min":1,"max":1},"relays":{"min":1,"max":1},"faults":{"count":{"min":1,"max":1},"kinds":["meteor"]}}`, `unknown fault kind "meteor"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec("bad.json", []byte(c.body))
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *SpecError", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "scenario bad.json") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %q, want one line naming the file and containing %q", err, c.want)
			}
		})
	}
	if _, err := Load("testdata/broken-range.json"); err == nil || !strings.Contains(err.Error(), "testdata/broken-range.json: field sagas") {
		t.Fatalf("file: %v", err)
	}
	if _, err := Load("no-such-scenario"); !errors.Is(err, ErrUnknownScenario) {
		t.Fatalf("unknown name: %v", err)
	}
}

func TestUnknownFailpoint(t *testing.T) {
	s, _ := Load("relay-crash")
	s.Faults.Failpoints = []string{"relay.after-lunch"}
	_, err := Generate(s, 1, testCatalog)
	if err == nil || !strings.Contains(err.Error(), `unknown failpoint "relay.after-lunch"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseSeedsAndShard(t *testing.T) {
	got, err := ParseSeeds("1-3,7,9-10")
	if err != nil || !reflect.DeepEqual(got, []uint64{1, 2, 3, 7, 9, 10}) {
		t.Fatalf("ParseSeeds = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "5-2", "1-x"} {
		if _, err := ParseSeeds(bad); err == nil {
			t.Errorf("ParseSeeds(%q) accepted", bad)
		}
	}
	all, _ := ParseSeeds("1-100")
	seen := map[uint64]int{}
	for i := 1; i <= 7; i++ {
		part, err := Shard(all, fmt.Sprintf("%d/7", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range part {
			seen[s]++
		}
	}
	if len(seen) != 100 {
		t.Fatalf("shards cover %d of 100 seeds", len(seen))
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("seed %d in %d shards", s, n)
		}
	}
	for _, bad := range []string{"0/3", "4/3", "a/b", "3"} {
		if _, err := Shard(all, bad); err == nil {
			t.Errorf("Shard(%q) accepted", bad)
		}
	}
}
