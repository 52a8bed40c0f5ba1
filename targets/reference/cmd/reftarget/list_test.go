package main

import (
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/sagachaos/sagachaos/targets"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
)

// TestListFailpointsKeepsKinds: every flavour's --list-failpoints says which
// points are markers. The CDC listing once dropped the kind, so the
// generator armed markers on reference-cdc and every process refused to
// start (a consumer-crash or orchestrator-crash run ended in exit 2).
func TestListFailpointsKeepsKinds(t *testing.T) {
	for _, flavour := range []string{"polling", "cdc"} {
		points := failpoint.ForFlavour(flavour)
		got := listed(t, points)
		if len(got) != len(points) {
			t.Fatalf("%s: listed %d points, the catalogue has %d", flavour, len(got), len(points))
		}
		markers := 0
		for i, p := range points {
			if got[i].Name != p.Name || got[i].Kind != p.Kind || got[i].Component != p.Component {
				t.Errorf("%s: listed %+v for %s (component %s, kind %q)", flavour, got[i], p.Name, p.Component, p.Kind)
			}
			if p.Kind == "marker" {
				markers++
			}
		}
		if markers == 0 {
			t.Errorf("%s: no marker in the catalogue; the test proves nothing", flavour)
		}
	}
}

func listed(t *testing.T, points []failpoint.Point) []targets.Failpoint {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	listFailpoints(points)
	w.Close()
	os.Stdout = stdout
	var out []targets.Failpoint
	if err := json.Unmarshal(<-done, &out); err != nil {
		t.Fatalf("--list-failpoints output is not JSON: %v", err)
	}
	return out
}
