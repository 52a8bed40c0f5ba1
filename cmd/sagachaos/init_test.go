package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit writes the skeleton into an empty directory, refuses to
// overwrite it, and the written manifest loads (list mutants reads it).
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "My Service")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in := func(args ...string) (string, int) {
		cmd := exec.Command(cliBin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := in("init"); code != 0 || !strings.Contains(out, "sagachaos run --target ./sagachaos.json") {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sagachaos.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "my-service"`, `"role": "relay"`, `"consumes": [`, "// "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("skeleton lacks %q", want)
		}
	}
	if out, code := in("init"); code != 2 || !strings.Contains(out, "exists") {
		t.Errorf("second init: exit %d, want 2 and 'exists'\n%s", code, out)
	}
	if out, code := in("init", "--force", "--name", "shop"); code != 0 {
		t.Errorf("init --force: exit %d\n%s", code, out)
	}
	if out, code := in("list", "mutants", "./sagachaos.json"); code != 0 {
		t.Errorf("the written manifest does not load: exit %d\n%s", code, out)
	}
}
