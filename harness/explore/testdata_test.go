package explore

import (
	"github.com/sagachaos/sagachaos/scenarios"
)

// testCatalog is the reference target as the generator sees it.
var testCatalog = scenarios.Catalog{
	APIProcess: "orders",
	Processes: []scenarios.Process{
		{Name: "orders", Role: "api", Depends: []string{"postgres", "kafka", "mailer"}, Consumes: true},
		{Name: "inventory", Role: "consumer", Depends: []string{"postgres", "kafka"}, Consumes: true},
		{Name: "payment", Role: "consumer", Depends: []string{"postgres", "kafka", "gateway"}, Consumes: true},
		{Name: "delivery", Role: "consumer", Depends: []string{"postgres", "kafka", "carrier"}, Consumes: true},
		{Name: "relay", Role: "relay", Depends: []string{"postgres", "kafka"}, Replicas: 2},
	},
	Failpoints: []scenarios.FailpointRef{
		{Name: "relay.after-select", Component: "relay"}, {Name: "relay.after-publish", Component: "relay"},
		{Name: "relay.after-mark", Component: "relay"}, {Name: "inventory.after-commit", Component: "inventory"},
		{Name: "payment.after-charge", Component: "payment"}, {Name: "delivery.after-ship", Component: "delivery"},
		{Name: "orders.after-state-save", Component: "orders"},
	},
}

func testMutator(seed uint64) *Mutator {
	spec, err := scenarios.Load("everything")
	if err != nil {
		panic(err)
	}
	return &Mutator{Spec: spec, Catalog: testCatalog, Rand: NewRand(seed)}
}
