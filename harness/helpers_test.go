package harness

import (
	"context"
	"testing"

	"github.com/sagachaos/sagachaos/targets"
)

// prepareReference finds, builds and catalogues the reference target.
func prepareReference(t *testing.T) (*targets.Manifest, string, []targets.Failpoint) {
	t.Helper()
	m, err := FindTarget("reference")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := Prepare(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	return m, bin, fps
}
