package scenarios

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Catalog is what the generator needs to know about a target: its processes
// (to name instances and links) and its declared failpoints. The harness
// builds it from the manifest.
type Catalog struct {
	Processes  []Process
	Failpoints []FailpointRef
	// APIProcess serves the workload API; the clients reach it through the
	// link "client→<APIProcess>".
	APIProcess string
	// Domain is the target's workload and resources (workload.go); nil
	// draws empty bodies.
	Domain *Domain
	// Ambiguous lists "provider/action" for every world action that
	// declares the nemesis may make it ambiguous.
	Ambiguous []string
	// Saga is the saga the target implements, for aiming faults at its
	// steps and compensations; nil: no saga moments.
	Saga *models.SagaSpec
	// Slots are the replication slots the processes declare (a CDC relay's).
	Slots []SlotRef
}

// SlotRef is a declared replication slot: its database and the process
// whose instances compete for it.
type SlotRef struct {
	DB      string
	Process string
}

// Process is one component of the target as the generator sees it.
type Process struct {
	Name     string
	Role     string
	Depends  []string
	Replicas int
	// Consumes is true for a process that declares consumer groups
	// (manifest consumes): only those can be rewound.
	Consumes bool
	// Types are the record types it consumes (manifest consumes types).
	Types []string
}

// FailpointRef is a declared failpoint (or marker) and the process that
// owns it.
type FailpointRef struct {
	Name      string
	Component string
	// Kind is "" for a failpoint that can be armed, "marker" for a
	// reachability marker (a trigger, never armed).
	Kind string
}

// Instances names the running instances of p given a replica count.
func Instances(name string, replicas int) []string {
	if replicas <= 1 {
		return []string{name}
	}
	out := make([]string, replicas)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", name, i+1)
	}
	return out
}

// LinkName is the name of the proxied link from a component to a
// dependency (DESIGN §5).
func LinkName(component, dependency string) string { return component + "→" + dependency }

// instancesOf returns the instance names of every process, honouring the
// replica overrides.
func (c Catalog) instancesOf(replicas map[string]int) map[string][]string {
	out := map[string][]string{}
	for _, p := range c.Processes {
		n := p.Replicas
		if r, ok := replicas[p.Name]; ok {
			n = r
		}
		out[p.Name] = Instances(p.Name, n)
	}
	return out
}

// Links lists every link a run of the target has, given replica overrides.
func (c Catalog) Links(replicas map[string]int) []string {
	inst := c.instancesOf(replicas)
	var out []string
	for _, p := range c.Processes {
		for _, in := range inst[p.Name] {
			for _, d := range p.Depends {
				out = append(out, LinkName(in, d))
			}
		}
	}
	if c.APIProcess != "" {
		out = append(out, LinkName("client", c.APIProcess))
	}
	sort.Strings(out)
	return out
}

func matchAny(pats []string, s string) bool {
	if len(pats) == 0 {
		return true
	}
	for _, p := range pats {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

func filter(xs []string, pats []string) []string {
	var out []string
	for _, x := range xs {
		if matchAny(pats, x) {
			out = append(out, x)
		}
	}
	return out
}

// CheckAgainst reports the first pattern of s that names nothing the
// target has: a failpoint the target does not declare, a component or link
// it does not have. Such a scenario would silently test less than it says.
func (s *Spec) CheckAgainst(file string, c Catalog) error {
	var fps []string
	for _, f := range c.Failpoints {
		if f.Kind != "marker" {
			fps = append(fps, f.Name)
		}
	}
	var comps []string
	most := c.RelayReplicas(s.Relays.Max)
	for _, v := range c.instancesOf(most) {
		comps = append(comps, v...)
	}
	links := c.Links(most)
	if c.Domain != nil {
		known := c.Domain.Params()
		for _, k := range sortedParams(s.Params) {
			if !slices.Contains(known, k) {
				return &SpecError{File: file, Field: "params." + k,
					Problem: fmt.Sprintf("the target declares no range %q (known: %s)", k, strings.Join(known, ", "))}
			}
			if c.Domain.keyParam(k) && s.Params[k].Max > MaxKeys {
				return &SpecError{File: file, Field: "params." + k + ".max", Problem: fmt.Sprintf("%d keys is above %d", s.Params[k].Max, MaxKeys)}
			}
		}
	}
	inst := c.instancesOf(most)
	for _, set := range []struct {
		field string
		pats  []string
		names []string
		what  string
	}{
		{"faults.failpoints", s.Faults.Failpoints, fps, "unknown failpoint"},
		{"faults.components", s.Faults.Components, comps, "no component matches"},
		{"faults.links", s.Faults.Links, links, "no link matches"},
	} {
		for i, p := range set.pats {
			if len(filter(set.names, c.expand([]string{p}, inst, set.field))) == 0 {
				return &SpecError{File: file, Field: fmt.Sprintf("%s[%d]", set.field, i),
					Problem: fmt.Sprintf("%s %q (known: %s)", set.what, p, strings.Join(set.names, ", "))}
			}
		}
	}
	return nil
}

// Generate draws the concrete scenario for seed from s. The same spec,
// catalog and seed always give the same scenario.
func Generate(s *Spec, seed uint64, c Catalog) (Scenario, error) {
	if err := s.CheckAgainst(s.Name, c); err != nil {
		return Scenario{}, err
	}
	sc := ScenarioGen(s, c).Example(int(seed))
	sc.Seed = seed
	return sc, nil
}

// ScenarioGen is the rapid generator behind Generate; `run --shrink` and
// users' own property tests drive it directly so rapid can shrink a failing
// case.
func ScenarioGen(s *Spec, c Catalog) *rapid.Generator[Scenario] {
	return rapid.Custom(func(t *rapid.T) Scenario {
		return draw(t, s, c)
	})
}

func drawRange(t *rapid.T, r Range, label string) int {
	if r.Max <= r.Min {
		return r.Min
	}
	return rapid.IntRange(r.Min, r.Max).Draw(t, label)
}

func chance(t *rapid.T, p float64, label string) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	// Integer draws shrink towards 0, i.e. towards "no".
	return rapid.IntRange(0, 999).Draw(t, label) >= 1000-int(p*1000)
}

func draw(t *rapid.T, s *Spec, c Catalog) Scenario {
	sc := Scenario{Name: s.Name, Description: s.Description, Limits: s.Limits}
	relays := drawRange(t, s.Relays, "relays")
	sc.Replicas = c.RelayReplicas(relays)
	if s.Swarm != nil {
		s, sc.Swarm = s.Swarm.draw(t, s, c)
	}
	if s.scale != 0 && s.scale != 1 {
		sc.Scale = s.scale
	}

	drawWorkload(t, s, c.Domain, &sc)
	nOrders := len(sc.Workload.Sagas)
	if s.Duration > 0 {
		spread(t, s, &sc)
	}
	if s.Races != nil {
		s.Races.draw(t, &sc)
	}
	if s.Schedule != nil {
		sc.Faults = drawSchedule(t, s, c, &sc)
		return sc
	}

	nFaults := drawRange(t, s.Faults.Count, "faults")
	for i := 0; i < nFaults; i++ {
		if f, ok := drawFault(t, s, c, sc.Replicas, nOrders); ok {
			f.ID = fmt.Sprintf("f%d", len(sc.Faults)+1)
			sc.Faults = append(sc.Faults, f)
		}
	}
	sort.SliceStable(sc.Faults, func(i, j int) bool { return sc.Faults[i].AfterOrders < sc.Faults[j].AfterOrders })
	for i := range sc.Faults {
		sc.Faults[i].ID = fmt.Sprintf("f%d", i+1)
	}
	return sc
}

func pick(t *rapid.T, xs []string, label string) string {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}

// drawFault draws one fault: its kind from the spec's list, its trigger and
// window, then whatever the kind draws (its target and parameters), with
// the spec's fixed parameters laid over them.
func drawFault(t *rapid.T, s *Spec, c Catalog, replicas map[string]int, nOrders int) (Fault, bool) {
	kind := pick(t, s.Faults.Kinds, "kind")
	f := Fault{Kind: kind, AfterOrders: rapid.IntRange(0, max(0, nOrders*3/4)).Draw(t, "after"),
		Duration: Duration(int64(drawRange(t, s.Faults.DurationMS, "duration")) * 1e6)}
	k, err := faults.New(kind)
	if err != nil {
		return f, false // ParseSpec refused unknown kinds already
	}
	target, ok := k.Draw(t, c.aim(s, replicas))
	if !ok {
		return f, false
	}
	if fixed := s.Faults.Params[kind]; fixed != nil {
		_ = faults.Overlay(k, fixed) // validated by ParseSpec
	}
	if _, armed := k.(faults.StartArmed); armed {
		f.AfterOrders = 0 // armed at start; fires on its Nth hit
	}
	f.Target, f.Params = target, k
	return f, true
}

// aim is what a drawn run offers a fault, filtered by the spec's patterns.
// Aim is what a run of the target with the given replica overrides offers
// a fault drawn for s: what the generator aims at, for callers that draw
// or redraw one fault of a concrete scenario (`sagachaos explore`).
func (c Catalog) Aim(s *Spec, replicas map[string]int) faults.Aim { return c.aim(s, replicas) }

func (c Catalog) aim(s *Spec, replicas map[string]int) faults.Aim {
	inst := c.instancesOf(replicas)
	a := faults.Aim{Ambiguous: c.Ambiguous}
	linkPats := c.expand(s.Faults.Links, inst, "faults.links")
	compPats := c.expand(s.Faults.Components, inst, "faults.components")
	fpPats := c.expand(s.Faults.Failpoints, inst, "faults.failpoints")
	for _, l := range filter(c.Links(replicas), linkPats) {
		if s.procs == nil || s.procs[linkProcess(c, l, replicas)] {
			a.Links = append(a.Links, l)
		}
	}
	for _, p := range c.Processes {
		if s.procs != nil && !s.procs[p.Name] {
			continue
		}
		for _, in := range inst[p.Name] {
			if !matchAny(compPats, in) {
				continue
			}
			a.Components = append(a.Components, in)
			if p.Consumes {
				a.Consumers = append(a.Consumers, in)
			}
		}
	}
	for _, fp := range c.Failpoints {
		if fp.Kind == "marker" || (s.procs != nil && !s.procs[fp.Component]) {
			continue
		}
		if matchAny(fpPats, fp.Name) {
			a.Failpoints = append(a.Failpoints, faults.FailpointAim{Name: fp.Name, Instances: inst[fp.Component]})
		}
	}
	for _, sl := range c.Slots {
		if s.procs != nil && !s.procs[sl.Process] {
			continue
		}
		if in := filter(inst[sl.Process], compPats); len(in) > 0 {
			a.Slots = append(a.Slots, faults.SlotAim{DB: sl.DB, Instances: in})
		}
	}
	return a
}

// linkProcess is the process a link belongs to: its component's process,
// or the API process for the client's link.
func linkProcess(c Catalog, link string, replicas map[string]int) string {
	from, to, _ := strings.Cut(link, "→")
	if from == "client" {
		return to
	}
	for name, ins := range c.instancesOf(replicas) {
		for _, in := range ins {
			if in == from {
				return name
			}
		}
	}
	return ""
}
