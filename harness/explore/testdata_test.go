package explore

import (
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// testCatalog is the reference target as the generator sees it: its
// manifest (processes, workload, resources) and a hand-written list of
// its failpoints (listing them means building it).
var testCatalog = func() scenarios.Catalog {
	m, err := targets.LoadManifest("../../targets/reference/manifest.json")
	if err != nil {
		panic(err)
	}
	var fps []targets.Failpoint
	for _, f := range [][2]string{
		{"relay.after-select", "relay"}, {"relay.after-publish", "relay"}, {"relay.after-mark", "relay"},
		{"inventory.after-commit", "inventory"}, {"payment.after-charge", "payment"}, {"delivery.after-ship", "delivery"},
		{"orders.after-state-save", "orders"},
	} {
		fps = append(fps, targets.Failpoint{Name: f[0], Component: f[1]})
	}
	// A reachability marker: event triggers may wait for it, nothing may
	// arm it.
	fps = append(fps, targets.Failpoint{Name: "orders.timeout.charging", Component: "orders", Kind: targets.KindMarker})
	return target.Catalog(m, fps)
}()

func testMutator(seed uint64) *Mutator {
	spec, err := scenarios.Load("everything")
	if err != nil {
		panic(err)
	}
	return &Mutator{Spec: spec, Catalog: testCatalog, Rand: NewRand(seed)}
}
