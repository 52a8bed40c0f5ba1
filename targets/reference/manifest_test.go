package reference_test

import (
	"testing"

	"github.com/sagachaos/sagachaos/targets"
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
