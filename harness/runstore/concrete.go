package runstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrNotConcrete is returned by ReadScenarioFile for a JSON file that is
// not a concrete scenario (a scenario spec of ranges, say).
var ErrNotConcrete = errors.New("not a concrete scenario")

// ReadScenarioFile reads a concrete scenario from a file: a run
// directory's scenario.json (target, mutant and scenario), a corpus entry
// of `sagachaos explore` (the same format), or a bare scenario object (the
// "scenario" part alone). A file of another shape — a spec of ranges —
// is ErrNotConcrete, so a caller can try it as a spec; a concrete scenario
// with a bad fault is an error naming the file, the fault and the field.
func ReadScenarioFile(path string) (Scenario, error) {
	var sc Scenario
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, err
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return sc, ErrNotConcrete
	}
	if inner, ok := top["scenario"]; ok && isConcrete(inner) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			return sc, fmt.Errorf("%s: %w", path, err)
		}
		return sc, nil
	}
	if isConcrete(b) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc.Scenario); err != nil {
			return sc, fmt.Errorf("%s: %w", path, err)
		}
		return sc, nil
	}
	return sc, ErrNotConcrete
}

// isConcrete: an object with a workload whose sagas (or, in an older
// file, orders) are a list (a spec's "orders" is a range object, and a spec
// has no workload).
func isConcrete(b []byte) bool {
	var v struct {
		Workload *struct {
			Sagas  json.RawMessage `json:"sagas"`
			Orders json.RawMessage `json:"orders"`
		} `json:"workload"`
	}
	if json.Unmarshal(b, &v) != nil || v.Workload == nil {
		return false
	}
	for _, l := range []json.RawMessage{v.Workload.Sagas, v.Workload.Orders} {
		if l = bytes.TrimSpace(l); len(l) > 0 && l[0] == '[' {
			return true
		}
	}
	return false
}
