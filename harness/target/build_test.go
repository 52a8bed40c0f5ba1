package target

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/targets"
)

// TestBuildOutsideAModule: a target in another language, in a directory
// with no go.mod above it, builds from its own directory; {{dir}} and
// {{bin}} are filled in the build and failpoint commands; a build that
// succeeded runs once per process.
func TestBuildOutsideAModule(t *testing.T) {
	dir := t.TempDir()
	if _, err := moduleRoot(dir); err == nil {
		t.Fatalf("the temporary directory %s is inside a Go module: set TMPDIR elsewhere", dir)
	}
	m := &targets.Manifest{Name: "outside", Dir: dir,
		Build: &targets.Build{Command: []string{"sh", "-c",
			`pwd > built-in; echo '{{dir}}' > dir; echo x >> count; touch '{{bin}}/marker'; echo '[{"name":"a.b","component":"a","description":"d"}]' > fps.json`}},
		Failpoints: []string{"cat", "{{dir}}/fps.json"},
	}
	bin := filepath.Join(t.TempDir(), "bin")
	for range 2 {
		if _, err := Build(context.Background(), m, bin); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	abs, _ := filepath.Abs(dir)
	if got := read("built-in"); got != abs {
		t.Errorf("the build ran in %s, want the manifest's directory %s", got, abs)
	}
	if got := read("dir"); got != abs {
		t.Errorf("{{dir}} = %s, want %s", got, abs)
	}
	if got := read("count"); got != "x" {
		t.Errorf("the build ran %d times in one process, want once", strings.Count(got, "x"))
	}
	if _, err := os.Stat(filepath.Join(bin, "marker")); err != nil {
		t.Errorf("{{bin}} in the build: %v", err)
	}
	fps, err := FailpointCatalog(context.Background(), m, bin)
	if err != nil || len(fps) != 1 || fps[0].Name != "a.b" {
		t.Errorf("FailpointCatalog = %v, %v", fps, err)
	}
}
