package reference_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
	"github.com/sagachaos/sagachaos/targets/reference/internal/delivery"
	"github.com/sagachaos/sagachaos/targets/reference/internal/inventory"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/orders"
	"github.com/sagachaos/sagachaos/targets/reference/internal/payment"
)

// The manifest must stay loadable by the harness.
func TestManifestLoads(t *testing.T) {
	m, err := targets.LoadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.API.Process != "orders" || len(m.Observe.Outbox) != 4 || len(m.Observe.Applied) != 4 {
		t.Fatalf("unexpected manifest: %+v", m)
	}
}

// TestManifestDeclaresWhatTheServicesConsume: the manifest's consumes say
// what the code does — each service's consumer name, group, topics and the
// types its handler applies — and the relay is a relay.
func TestManifestDeclaresWhatTheServicesConsume(t *testing.T) {
	m, err := targets.LoadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]struct {
		name   string
		topics []string
		types  map[string]bool
	}{
		"orders":    {orders.Name, []string{msg.TopicInventory, msg.TopicPayment, msg.TopicDelivery}, orders.Types},
		"inventory": {inventory.Name, []string{msg.TopicOrders}, inventory.Types},
		"payment":   {payment.Name, []string{msg.TopicOrders}, payment.Types},
		"delivery":  {delivery.Name, []string{msg.TopicOrders}, delivery.Types},
	}
	for _, p := range m.Processes {
		want, consumer := code[p.Name]
		if !consumer {
			if p.Role != "relay" || len(p.Consumes) != 0 {
				t.Errorf("%s: role %q, consumes %v; want a relay consuming nothing", p.Name, p.Role, p.Consumes)
			}
			continue
		}
		if len(p.Consumes) != 1 {
			t.Fatalf("%s declares %d consumers, the code runs one", p.Name, len(p.Consumes))
		}
		c := p.Consumes[0]
		// reftarget names each service's group after the service.
		if c.Consumer != want.name || c.Group != p.Name || !slices.Equal(c.Topics, want.topics) {
			t.Errorf("%s: manifest %+v, code consumer %s group %s topics %v", p.Name, c, want.name, p.Name, want.topics)
		}
		got := map[string]bool{}
		for _, ty := range c.Types {
			got[ty] = true
		}
		if !maps.Equal(got, want.types) {
			t.Errorf("%s: manifest types %v, handler applies %v", p.Name, c.Types, want.types)
		}
	}
}

// The order saga's declared step timeout (models.OrderSaga.StepTimeoutMS,
// the liveness promise the quiesce stage proves stuck sagas against) is
// the orchestrator's STEP_TIMEOUT; the inboxes are never pruned, so the
// applied queries are complete (a missing applied record is evidence).
func TestManifestMatchesTheSpec(t *testing.T) {
	m, err := targets.LoadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Processes {
		if p.Name != m.API.Process {
			continue
		}
		d, err := time.ParseDuration(p.Env["STEP_TIMEOUT"])
		if err != nil || d.Milliseconds() != models.OrderSaga.StepTimeoutMS {
			t.Fatalf("STEP_TIMEOUT %q, spec step timeout %d ms", p.Env["STEP_TIMEOUT"], models.OrderSaga.StepTimeoutMS)
		}
	}
	for _, q := range m.Observe.Applied {
		if !q.Complete {
			t.Errorf("applied query of %s not complete", q.DB)
		}
	}
}
