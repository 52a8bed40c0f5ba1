package scenarios

import (
	"fmt"
	"slices"
	"sort"

	"pgregory.net/rapid"
)

// Swarm testing (Groce, Zhang, Eide, Chen, Regehr, ISSTA 2012): leaving a
// random subset of features out of each test finds more bugs than enabling
// every feature in every test, because features suppress each other (a
// broker that is always failing never lets a relay build a backlog). A
// swarm scenario enables, per seed, a random subset of its fault kinds,
// of the target's processes (faults aim only at those, by role and
// declaration, never by name) and of the workload's features. What was
// enabled is journaled in the scenario (Scenario.Swarm).

// Workload features a swarm turns on or off.
const (
	FeatureDeclines   = "declines"   // decline_rate (else 0)
	FeatureAmbiguous  = "ambiguous"  // ambiguous_rate (else 0)
	FeatureDuplicates = "duplicates" // duplicate_rate (else 0)
	FeatureBursts     = "bursts"     // burst_rate (else 0)
	FeatureHotKeys    = "hot-keys"   // one or two keys of each counted resource, the lower quarter of resource_initial
	FeatureRaces      = "races"      // concurrent and in-flight duplicates, parallel orders
	FeatureRetries    = "retries"    // retries after an unknown outcome spread over seconds
)

// Features lists the workload features, in draw order.
var Features = []string{FeatureDeclines, FeatureAmbiguous, FeatureDuplicates, FeatureBursts, FeatureHotKeys, FeatureRaces, FeatureRetries}

// Swarm is a scenario's swarm: the probability that each fault kind, each
// process and each workload feature is enabled in a seed.
type Swarm struct {
	Kinds      float64 `json:"kinds"`
	Components float64 `json:"components"`
	Features   float64 `json:"features"`
}

func (w *Swarm) validate() *SpecError {
	for _, r := range []struct {
		field string
		v     float64
	}{{"kinds", w.Kinds}, {"components", w.Components}, {"features", w.Features}} {
		if r.v <= 0 || r.v > 1 {
			return &SpecError{Field: "swarm." + r.field, Problem: fmt.Sprintf("%v is not a probability in (0, 1]", r.v)}
		}
	}
	return nil
}

// SwarmDraw is what a swarm enabled for one seed.
type SwarmDraw struct {
	Kinds      []string `json:"kinds"`
	Components []string `json:"components"`
	Features   []string `json:"features"`
}

// draw enables a subset of each (never an empty one) and returns the spec
// the seed's scenario is drawn from.
func (w *Swarm) draw(t *rapid.T, s *Spec, c Catalog) (*Spec, *SwarmDraw) {
	subset := func(all []string, p float64, label string) []string {
		var on []string
		for _, x := range all {
			if coin(t, p, label) {
				on = append(on, x)
			}
		}
		if len(on) == 0 && len(all) > 0 {
			on = []string{all[uniformInt(t, 0, len(all)-1, label)]}
		}
		return on
	}
	d := &SwarmDraw{}
	kinds := slices.Clone(s.Faults.Kinds)
	sort.Strings(kinds)
	d.Kinds = subset(slices.Compact(kinds), w.Kinds, "swarm-kind")
	var procs []string
	for _, p := range c.Processes {
		procs = append(procs, p.Name)
	}
	d.Components = subset(procs, w.Components, "swarm-component")
	d.Features = subset(Features, w.Features, "swarm-feature")

	e := *s
	e.Faults.Kinds = d.Kinds
	e.procs = map[string]bool{}
	for _, p := range d.Components {
		e.procs[p] = true
	}
	on := map[string]bool{}
	for _, f := range d.Features {
		on[f] = true
	}
	if !on[FeatureDeclines] {
		e.DeclineRate = 0
	}
	if !on[FeatureAmbiguous] {
		e.AmbiguousRate = 0
	}
	if !on[FeatureDuplicates] {
		e.DuplicateRate = 0
	}
	if !on[FeatureBursts] {
		e.BurstRate = 0
	}
	if on[FeatureHotKeys] {
		// One or two keys of every counted resource, with the lower quarter
		// of the initial amounts: every saga contends for the same rows,
		// and the resource runs out part-way through.
		e.ResourceKeys = &Range{Min: 1, Max: 2}
		if r := s.ResourceInitial; r != nil {
			e.ResourceInitial = &Range{Min: r.Min, Max: r.Min + (r.Max-r.Min)/4}
		}
	}
	if s.Races != nil {
		r := *s.Races
		if !on[FeatureRaces] {
			r.ConcurrentRate, r.InflightRate, r.ParallelRate = 0, 0, 0
		}
		if !on[FeatureRetries] {
			r.RetrySpreadMS = Range{}
		}
		e.Races = &r
	}
	return &e, d
}
