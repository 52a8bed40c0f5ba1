package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// TestListFaults: every registered kind is listed with its description and
// each parameter with its default.
func TestListFaults(t *testing.T) {
	r := sagachaos(t, "list", "faults")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, k := range faults.Kinds() {
		if !strings.Contains(r.stdout, k.Name()+" — "+k.Doc()+"\n") {
			t.Errorf("kind %s is not listed with its description", k.Name())
		}
		for _, p := range faults.Params(k) {
			if !strings.Contains(r.stdout, p.Name) || (p.Default != "" && !strings.Contains(r.stdout, p.Type+" = "+p.Default)) {
				t.Errorf("%s: parameter %s = %s not listed", k.Name(), p.Name, p.Default)
			}
		}
	}
}

// TestBadFaultParamsExitTwo: a scenario file or a saved scenario.json with
// a bad fault parameter is refused when it is loaded: exit 2, one line
// naming the file, the fault and the field, and no run.
func TestBadFaultParamsExitTwo(t *testing.T) {
	out := t.TempDir()
	r := sagachaos(t, "run", "--scenario", "testdata/bad-fault-param.json", "--out", out)
	want := "scenario testdata/bad-fault-param.json: field faults.params.latency.latency_msx: unknown parameter"
	if lines := errorLines(r.stderr); r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("exit %d, stderr %q, want 2 and one line with %q", r.code, r.stderr, want)
	}
	if dirs, _ := filepath.Glob(filepath.Join(out, "*")); len(dirs) != 0 {
		t.Fatalf("a refused scenario made run dirs %v", dirs)
	}

	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := `{"target":"reference","scenario":{"name":"calm","seed":1,"workload":{"initial_stock":{},"clients":1,"orders":[]},
	"faults":[{"id":"f1","kind":"kafka-produce-err","after_orders":0,"params":{"count":0}}],
	"limits":{"time_limit":"10s","quiesce":"10s","client_timeout":"1s"}}}`
	if err := os.WriteFile(filepath.Join(dir, "scenario.json"), []byte(sc), 0o644); err != nil {
		t.Fatal(err)
	}
	r = sagachaos(t, "repro", dir)
	want = filepath.Join(dir, "scenario.json") + ": fault f1 (kafka-produce-err): field params.count: 0 is below 1"
	if lines := errorLines(r.stderr); r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("repro: exit %d, stderr %q, want 2 and one line with %q", r.code, r.stderr, want)
	}
}
