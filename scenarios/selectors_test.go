package scenarios

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// tripCatalog is a choreographed target with other names than the
// reference: the selectors must find its parts by role and saga.
var tripCatalog = Catalog{
	APIProcess: "trips",
	Processes: []Process{
		{Name: "trips", Role: "api", Depends: []string{"postgres", "kafka"}, Consumes: true},
		{Name: "flights", Role: "consumer", Depends: []string{"postgres", "kafka", "airline"}, Consumes: true},
		{Name: "payments", Role: "consumer", Depends: []string{"postgres", "kafka", "payments"}, Consumes: true},
		{Name: "relay", Role: "relay", Depends: []string{"postgres", "kafka"}, Replicas: 2},
	},
	Saga: &models.SagaSpec{Name: "trip", Steps: []models.Step{
		{Action: models.Action{Name: "book-flight"}, Service: "flights", Kind: models.Compensatable},
		{Action: models.Action{Name: "charge"}, Service: "payments", Kind: models.Pivot},
	}},
	Failpoints: []FailpointRef{
		{Name: "trips.after-create", Component: "trips"}, {Name: "flights.after-book", Component: "flights"},
		{Name: "payments.after-charge", Component: "payments"}, {Name: "relay.after-select", Component: "relay"},
		{Name: "flights.redelivered", Component: "flights", Kind: "marker"},
	},
}

func TestSelectorsExpandByRoleAndSaga(t *testing.T) {
	cases := []struct {
		catalog Catalog
		field   string
		pats    []string
		want    []string
	}{
		{testCatalog, "faults.components", []string{"@consumer"}, []string{"inventory", "payment", "delivery"}},
		{tripCatalog, "faults.components", []string{"@consumer"}, []string{"flights", "payments"}},
		{tripCatalog, "faults.components", []string{"@consumer", "@api"}, []string{"flights", "payments", "trips"}},
		{tripCatalog, "faults.components", []string{"@relay"}, []string{"relay-1", "relay-2"}},
		{tripCatalog, "faults.components", []string{"@steps"}, []string{"flights", "payments"}},
		{testCatalog, "faults.failpoints", []string{"@api.*"}, []string{"orders.*"}},
		{tripCatalog, "faults.failpoints", []string{"@consumer.*"}, []string{"flights.*", "payments.*"}},
		{tripCatalog, "faults.failpoints", []string{"@pivot.after-*", "relay.*"}, []string{"payments.after-*", "relay.*"}},
		{testCatalog, "faults.links", []string{"@pivot→*"}, []string{"payment→*"}},
		{testCatalog, "faults.links", []string{"@pivot→@world"}, []string{"payment→carrier", "payment→gateway", "payment→mailer"}},
		{tripCatalog, "faults.links", []string{"@pivot→@world"}, []string{"payments→airline", "payments→payments"}},
		{tripCatalog, "faults.links", []string{"@relay→kafka", "client→trips"}, []string{"relay-1→kafka", "relay-2→kafka", "client→trips"}},
		// Nothing selected is the empty pattern: it matches no name (an
		// empty list would match every name).
		{Catalog{Processes: tripCatalog.Processes}, "faults.components", []string{"@pivot"}, []string{""}},
		{tripCatalog, "faults.components", nil, nil},
	}
	for _, c := range cases {
		got := c.catalog.expand(c.pats, c.catalog.instancesOf(nil), c.field)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %v on %s: got %q, want %q", c.field, c.pats, c.catalog.APIProcess, got, c.want)
		}
	}
}

// TestGeneralScenariosAimByRole: the general scenarios that used to name
// the reference's components draw the same kinds of faults on a target
// with other names, at the parts their descriptions promise.
func TestGeneralScenariosAimByRole(t *testing.T) {
	for _, c := range []struct {
		scenario string
		ok       func(f Fault) bool
	}{
		{"consumer-crash", func(f Fault) bool {
			return strings.HasPrefix(f.Target, "flights") || strings.HasPrefix(f.Target, "payments")
		}},
		{"orchestrator-crash", func(f Fault) bool { return strings.HasPrefix(f.Target, "trips") }},
		{"partition-payment", func(f Fault) bool { return strings.HasPrefix(f.Target, "payments→") }},
	} {
		s, err := Load(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for seed := uint64(1); seed <= 5; seed++ {
			sc, err := Generate(s, seed, tripCatalog)
			if err != nil {
				t.Fatalf("%s seed %d on a trip-like target: %v", c.scenario, seed, err)
			}
			for _, f := range sc.Faults {
				n++
				if !c.ok(f) {
					t.Errorf("%s seed %d: fault %s at %q is outside what the scenario selects", c.scenario, seed, f.Kind, f.Target)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s drew no fault on a trip-like target over seeds 1-5", c.scenario)
		}
	}
}

func TestBadSelectorsRefused(t *testing.T) {
	base := `{"name":"x","sagas":{"min":1,"max":1},"clients":{"min":1,"max":1},"relays":{"min":1,"max":1},"faults":{"count":{"min":1,"max":1},"kinds":["kill"],%s}}`
	for _, c := range []struct{ faults, want string }{
		{`"components":["@consumers"]`, `field faults.components[0]: unknown selector "@consumers" (known: @api, @consumer`},
		{`"components":["@world"]`, `selector "@world" selects world providers`},
		{`"links":["payment→@pivot"]`, `selector "@pivot" selects processes`},
		{`"failpoints":["x.*","@nobody.*"]`, `field faults.failpoints[1]: unknown selector "@nobody"`},
	} {
		_, err := ParseSpec("bad.json", []byte(strings.Replace(base, "%s", c.faults, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.faults, err, c.want)
		}
	}
	// A selector that selects nothing on this target is refused with the
	// names the target has, as a plain name that matches nothing is.
	s, _ := Load("partition-payment")
	noSaga := tripCatalog
	noSaga.Saga = nil
	if _, err := Generate(s, 1, noSaga); err == nil || !strings.Contains(err.Error(), `no link matches "@pivot→*"`) {
		t.Errorf("@pivot on a target without a saga: err = %v", err)
	}
}

// A relay process called otherwise than "relay" still gets the scenario's
// competing relays, and faults aim at its instances; a manifest without
// roles keeps the process named "relay".
func TestRelaysRangeByRole(t *testing.T) {
	publisher := Catalog{APIProcess: "api", Processes: []Process{
		{Name: "api", Role: "api", Depends: []string{"postgres", "kafka"}},
		{Name: "publisher", Role: "relay", Depends: []string{"postgres", "kafka"}},
	}}
	if got := publisher.RelayProcesses(); !reflect.DeepEqual(got, []string{"publisher"}) {
		t.Fatalf("relay processes %v", got)
	}
	legacy := Catalog{Processes: []Process{{Name: "orders"}, {Name: "relay"}}}
	if got := legacy.RelayProcesses(); !reflect.DeepEqual(got, []string{"relay"}) {
		t.Fatalf("relay processes without roles %v", got)
	}
	s, err := ParseSpec("relays.json", []byte(`{"name":"relays","sagas":{"min":5,"max":5},"clients":{"min":1,"max":1},"relays":{"min":3,"max":3},
		"faults":{"count":{"min":4,"max":4},"kinds":["kill"],"components":["@relay"]},
		"limits":{"time_limit":"10s","quiesce":"10s","client_timeout":"1s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Generate(s, 1, publisher)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sc.Replicas, map[string]int{"publisher": 3}) {
		t.Errorf("replicas %v, want publisher: 3", sc.Replicas)
	}
	for _, f := range sc.Faults {
		if !strings.HasPrefix(f.Target, "publisher-") {
			t.Errorf("kill aimed at %q, want a publisher instance", f.Target)
		}
	}
}
