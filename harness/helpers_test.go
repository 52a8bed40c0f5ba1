package harness

import (
	"context"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/targets"
)

// prepareReference finds, builds and catalogues the reference target.
func prepareReference(t *testing.T) (*targets.Manifest, string, []targets.Failpoint) {
	t.Helper()
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	bin, fps, err := target.Prepare(context.Background(), m, "")
	if err != nil {
		t.Fatal(err)
	}
	return m, bin, fps
}
