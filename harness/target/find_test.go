package target

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindAndCatalog(t *testing.T) {
	m, err := Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	if p := ManifestPath(m); !filepath.IsAbs(p) || !strings.HasSuffix(p, filepath.Join("targets", "reference", "manifest.json")) {
		t.Errorf("ManifestPath = %q", p)
	}
	c := Catalog(m, nil)
	for _, p := range c.Processes {
		if want := p.Name != "relay"; p.Consumes != want {
			t.Errorf("%s: Consumes %v, want %v (only processes that declare groups are rewind targets)", p.Name, p.Consumes, want)
		}
	}
	if err := ValidateMutant(m, "no-such-bug"); err == nil || !strings.Contains(err.Error(), `unknown mutant "no-such-bug"`) {
		t.Errorf("ValidateMutant: %v", err)
	}
	if _, err := Find("no-such-target"); err == nil {
		t.Error("Find of an unknown target succeeded")
	}
}

// TestManifestPathOfAFile: a manifest read from any file name replays from
// that file, not from a manifest.json beside it.
func TestManifestPathOfAFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "targets", "reference", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Find(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := ManifestPath(m); got != path {
		t.Errorf("ManifestPath = %q, want %q", got, path)
	}
}
