package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Mutator draws candidates: fresh scenarios from the spec's generator, and
// mutants of concrete scenarios (scenario.json) that stay valid — every
// fault's parameters pass its kind's validation (the registry decodes them
// again) and aim at something the run has. All its randomness comes from
// one *rand.Rand.
type Mutator struct {
	Spec    *scenarios.Spec
	Catalog scenarios.Catalog
	Rand    *rand.Rand
}

// maxFaults bounds the faults a mutant may carry (adding and combining
// would otherwise grow plans without end).
func (m *Mutator) maxFaults() int { return max(8, 2*m.Spec.Faults.Count.Max) }

// Fresh draws a scenario from the spec with a seed from the campaign's
// random source.
func (m *Mutator) Fresh() (scenarios.Scenario, uint64, error) {
	seed := m.Rand.Uint64N(1 << 40)
	sc, err := scenarios.Generate(m.Spec, seed, m.Catalog)
	return sc, seed, err
}

// Mutate returns a mutant of parent: one to three operators, each named in
// the returned list ("shift f2", "retarget f1", "add kill", "outcomes 3",
// "combine"). other is a second corpus entry for the combining operator
// (nil: none). A mutant that would be invalid is never returned: an
// operator that cannot apply is skipped (an error when none could).
func (m *Mutator) Mutate(parent scenarios.Scenario, other *scenarios.Scenario) (scenarios.Scenario, []string, error) {
	sc, err := clone(parent)
	if err != nil {
		return sc, nil, err
	}
	n := 1 + m.Rand.IntN(3)
	var ops []string
	for try := 0; len(ops) < n && try < 20; try++ {
		name, ok := m.apply(&sc, m.pickOp(sc, other != nil), other)
		if ok {
			ops = append(ops, name)
		}
	}
	if len(ops) == 0 {
		return sc, nil, fmt.Errorf("no operator applied")
	}
	m.normalise(&sc)
	if err := m.Valid(sc); err != nil {
		return sc, ops, fmt.Errorf("mutant %v is invalid: %w", ops, err)
	}
	return sc, ops, nil
}

// operators and their weights.
var operators = []struct {
	name   string
	weight int
	faulty bool // needs a fault to act on
}{
	{"shift", 6, true}, {"retarget", 3, true}, {"duration", 3, true}, {"param", 3, true},
	{"drop", 2, true}, {"dup", 2, true}, {"add", 4, false},
	{"outcomes", 2, false}, {"dups", 1, false}, {"races", 1, false}, {"burst", 1, false}, {"tempo", 1, false},
	{"stock", 1, false}, {"relays", 1, false}, {"workload", 1, false}, {"combine", 3, false},
}

func (m *Mutator) pickOp(sc scenarios.Scenario, canCombine bool) string {
	total := 0
	for _, o := range operators {
		if o.faulty && len(sc.Faults) == 0 || o.name == "combine" && !canCombine {
			continue
		}
		total += o.weight
	}
	x := m.Rand.IntN(total)
	for _, o := range operators {
		if o.faulty && len(sc.Faults) == 0 || o.name == "combine" && !canCombine {
			continue
		}
		if x < o.weight {
			return o.name
		}
		x -= o.weight
	}
	return "add"
}

func (m *Mutator) apply(sc *scenarios.Scenario, op string, other *scenarios.Scenario) (string, bool) {
	n := len(sc.Workload.Sagas)
	pickFault := func() int { return m.Rand.IntN(len(sc.Faults)) }
	switch op {
	case "shift":
		i := pickFault()
		f := &sc.Faults[i]
		if f.Params != nil {
			if _, armed := f.Params.(faults.StartArmed); armed {
				// Armed at start: its trigger is its hit count.
				return m.tweakParam(f, "hit", fmt.Sprintf("shift %s", f.ID))
			}
		}
		if f.Trigger != nil && f.Trigger.On != scenarios.TriggerOrders {
			return m.shiftEvent(f)
		}
		old := f.AfterOrders
		var at int
		if m.Rand.IntN(2) == 0 {
			at = m.Rand.IntN(max(1, n))
		} else {
			d := 1 + m.Rand.IntN(max(1, n/10))
			if m.Rand.IntN(2) == 0 {
				d = -d
			}
			at = min(max(0, f.AfterOrders+d), max(0, n-1))
		}
		// An orders trigger and AfterOrders say the same position.
		MoveOrderTriggers(f, func(int) int { return at })
		return fmt.Sprintf("shift %s %d→%d", f.ID, old, at), at != old
	case "retarget":
		i := pickFault()
		f := &sc.Faults[i]
		k, target, ok := m.draw(f.Kind, sc.Replicas)
		if !ok {
			return "", false
		}
		f.Target, f.Params = target, k
		return fmt.Sprintf("retarget %s→%s", f.ID, orDash(target)), true
	case "duration":
		i := pickFault()
		f := &sc.Faults[i]
		d := float64(f.Duration)
		if d <= 0 {
			d = 500e6
		}
		d *= math.Exp2(m.Rand.Float64()*4 - 2) // ×¼ … ×4
		d = min(max(d, 50e6), float64(max(10_000, 2*m.Spec.Faults.DurationMS.Max))*1e6)
		f.Duration = scenarios.Duration(int64(d) / 1e6 * 1e6)
		return fmt.Sprintf("duration %s %v", f.ID, f.Duration.D()), true
	case "param":
		i := pickFault()
		return m.tweakParam(&sc.Faults[i], "", fmt.Sprintf("param %s", sc.Faults[i].ID))
	case "drop":
		i := pickFault()
		id := sc.Faults[i].ID
		sc.Faults = slices.Delete(sc.Faults, i, i+1)
		return "drop " + id, true
	case "dup":
		if len(sc.Faults) >= m.maxFaults() {
			return "", false
		}
		f := sc.Faults[pickFault()]
		c, err := cloneFault(f)
		if err != nil {
			return "", false
		}
		c.ID = fmt.Sprintf("f%d", len(sc.Faults)+1)
		if c.Trigger != nil && c.Trigger.On != scenarios.TriggerOrders {
			// The same moment again, later: the next such event.
			t := *c.Trigger
			t.Count += 1 + m.Rand.IntN(3)
			c.Trigger = &t
		} else {
			d := m.Rand.IntN(max(1, n/5))
			MoveOrderTriggers(&c, func(p int) int { return min(max(0, p+d), max(0, n-1)) })
		}
		sc.Faults = append(sc.Faults, c)
		return "dup " + f.ID, true
	case "add":
		if len(sc.Faults) >= m.maxFaults() {
			return "", false
		}
		f, ok := m.donorFault(n, sc.Replicas)
		if !ok {
			return "", false
		}
		f.ID = fmt.Sprintf("f%d", len(sc.Faults)+1)
		sc.Faults = append(sc.Faults, f)
		return "add " + f.Kind, true
	case "outcomes":
		fields := m.outcomeFields()
		if n == 0 || len(fields) == 0 {
			return "", false
		}
		k := 1 + m.Rand.IntN(max(1, n/8))
		changed := 0
		for range k {
			i := m.Rand.IntN(n)
			f := fields[m.Rand.IntN(len(fields))]
			tokens := []string{f.spec.Default}
			for _, t := range []string{models.OutcomeDecline, models.OutcomeAmbiguous500, models.OutcomeAmbiguousHang} {
				if f.spec.Allows(t) {
					tokens = append(tokens, f.spec.Token(t, i+1))
				}
			}
			if setField(&sc.Workload.Sagas[i].Body, f.name, tokens[m.Rand.IntN(len(tokens))]) {
				changed++
			}
		}
		return fmt.Sprintf("outcomes %d", changed), changed > 0
	case "dups":
		if n == 0 {
			return "", false
		}
		k := 1 + m.Rand.IntN(max(1, n/8))
		for range k {
			o := &sc.Workload.Sagas[m.Rand.IntN(n)]
			if o.Submissions > 1 {
				o.Submissions = 1
			} else {
				o.Submissions = 2
			}
		}
		return fmt.Sprintf("dups %d", k), true
	case "races":
		// Request races (the driver runs them): a double click, a
		// duplicate while the first is in flight, a start without waiting
		// for the previous answer — toggled on a few sagas.
		if n == 0 {
			return "", false
		}
		k := 1 + m.Rand.IntN(max(1, n/8))
		for range k {
			i := m.Rand.IntN(n)
			o := &sc.Workload.Sagas[i]
			switch m.Rand.IntN(3) {
			case 0:
				if o.Concurrent > 0 {
					o.Concurrent = 0
				} else {
					o.Concurrent = 1 + m.Rand.IntN(2)
				}
			case 1:
				if o.DuplicateAfter > 0 {
					o.DuplicateAfter = 0
				} else {
					o.DuplicateAfter = scenarios.Duration(time.Duration(5+m.Rand.IntN(500)) * time.Millisecond)
				}
			default:
				o.Parallel = !o.Parallel && i > 0
			}
		}
		return fmt.Sprintf("races %d", k), true
	case "burst":
		if n < 2 {
			return "", false
		}
		from := m.Rand.IntN(n)
		to := min(n, from+2+m.Rand.IntN(max(1, n/4)))
		for i := from; i < to; i++ {
			sc.Workload.Sagas[i].Gap = 0
		}
		return fmt.Sprintf("burst %d-%d", from+1, to), true
	case "tempo":
		f := math.Exp2(m.Rand.Float64()*4 - 2)
		for i := range sc.Workload.Sagas {
			g := &sc.Workload.Sagas[i].Gap
			*g = scenarios.Duration(min(float64(*g)*f, 2e9))
		}
		return fmt.Sprintf("tempo ×%.2f", f), true
	case "stock":
		if len(sc.Workload.Resources) == 0 {
			return "", false
		}
		f := math.Exp2(m.Rand.Float64()*4 - 2)
		for _, amounts := range sc.Workload.Resources {
			for key, v := range amounts {
				amounts[key] = max(0, int64(math.Round(float64(v)*f)))
			}
		}
		return fmt.Sprintf("stock ×%.2f", f), true
	case "relays":
		names := m.Catalog.RelayProcesses()
		if len(names) == 0 {
			return "", false
		}
		p, _ := m.process(names[0])
		lo, hi := max(1, m.Spec.Relays.Min), max(m.Spec.Relays.Max, p.Replicas, 2)
		r := lo + m.Rand.IntN(hi-lo+1)
		if sc.Replicas == nil {
			sc.Replicas = map[string]int{}
		}
		if sc.Replicas[names[0]] == r {
			return "", false
		}
		for _, name := range names {
			sc.Replicas[name] = r
		}
		m.reaim(sc)
		return fmt.Sprintf("relays %d", r), true
	case "workload":
		donor, _, err := m.Fresh()
		if err != nil || len(donor.Workload.Sagas) == 0 {
			return "", false
		}
		rescale(sc.Faults, n, len(donor.Workload.Sagas))
		sc.Workload = donor.Workload
		return "workload", true
	case "combine":
		if other == nil || len(other.Faults) == 0 {
			return "", false
		}
		var mix []scenarios.Fault
		for _, f := range sc.Faults {
			if m.Rand.IntN(2) == 0 {
				mix = append(mix, f)
			}
		}
		theirs := append([]scenarios.Fault(nil), other.Faults...)
		rescale(theirs, n, len(other.Workload.Sagas))
		for _, f := range theirs {
			if m.Rand.IntN(2) == 0 && len(mix) < m.maxFaults() {
				c, err := cloneFault(f)
				if err == nil {
					mix = append(mix, c)
				}
			}
		}
		if len(mix) == 0 {
			return "", false
		}
		sc.Faults = mix
		m.reaim(sc)
		return "combine", true
	}
	return "", false
}

// tweakParam changes one parameter of f (key, or a random one): a number
// is scaled or stepped, a direction flipped, a failpoint action redrawn.
// The kind's validation decides: a value it refuses is not kept.
func (m *Mutator) tweakParam(f *scenarios.Fault, key, name string) (string, bool) {
	k, err := f.Spec()
	if err != nil {
		return "", false
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", false
	}
	var params map[string]any
	if json.Unmarshal(b, &params) != nil || len(params) == 0 {
		return "", false
	}
	keys := make([]string, 0, len(params))
	for p := range params {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	if key == "" {
		key = keys[m.Rand.IntN(len(keys))]
	}
	v, ok := params[key]
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case float64:
		switch {
		case x <= 8:
			x = max(0, x+float64(m.Rand.IntN(5)-2))
		default:
			x = math.Round(x * math.Exp2(m.Rand.Float64()*3-1.5))
		}
		params[key] = x
	case string:
		switch {
		case x == string(faults.Upstream):
			params[key] = string(faults.Downstream)
		case x == string(faults.Downstream):
			params[key] = string(faults.Upstream)
		case key == "action":
			params[key] = []string{"crash", "error", "sleep(300ms)", "sleep(3s)"}[m.Rand.IntN(4)]
		default:
			return "", false
		}
	case bool:
		params[key] = !x
	default:
		return "", false
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return "", false
	}
	nk, err := faults.Decode(f.Kind, raw)
	if err != nil {
		return "", false
	}
	if bytes.Equal(mustJSON(nk), b) {
		return "", false
	}
	f.Params = nk
	return fmt.Sprintf("%s %s=%v", name, key, params[key]), true
}

// draw aims a fault of kind at a run with the given replicas, as the
// generator does: the kind's own Draw over what the run offers (filtered by
// the spec's patterns), the spec's fixed parameters laid over it.
func (m *Mutator) draw(kind string, replicas map[string]int) (faults.Kind, string, bool) {
	aim := m.aim(replicas)
	var (
		k      faults.Kind
		target string
		ok     bool
	)
	rapid.Custom(func(t *rapid.T) bool {
		rapid.Bool().Draw(t, "explore") // rapid wants every generator to draw
		k, _ = faults.New(kind)
		if k == nil {
			return false
		}
		target, ok = k.Draw(t, aim)
		return ok
	}).Example(int(m.Rand.Int32()))
	if !ok || k == nil {
		return nil, "", false
	}
	if fixed := m.Spec.Faults.Params[kind]; fixed != nil {
		if faults.Overlay(k, fixed) != nil {
			return nil, "", false
		}
	}
	if k.Validate() != nil {
		return nil, "", false
	}
	return k, target, true
}

// donorFault takes a fault from a freshly generated scenario (so new
// material comes from the generator's own distribution), its trigger
// rescaled to n orders and aimed again if the donor's run had other
// replicas.
func (m *Mutator) donorFault(n int, replicas map[string]int) (scenarios.Fault, bool) {
	for range 4 {
		donor, _, err := m.Fresh()
		if err != nil || len(donor.Faults) == 0 {
			continue
		}
		f, err := cloneFault(donor.Faults[m.Rand.IntN(len(donor.Faults))])
		if err != nil {
			continue
		}
		fs := []scenarios.Fault{f}
		rescale(fs, n, len(donor.Workload.Sagas))
		sc := scenarios.Scenario{Workload: scenarios.Workload{Sagas: make([]scenarios.SagaPlan, n)}, Faults: fs, Replicas: replicas}
		m.reaim(&sc)
		if len(sc.Faults) == 1 {
			return sc.Faults[0], true
		}
	}
	return scenarios.Fault{}, false
}

// reaim redraws the aim of every fault whose target the run does not have
// (after the relay count changed, or faults came from another run), and
// drops those that cannot be aimed.
func (m *Mutator) reaim(sc *scenarios.Scenario) {
	kept := sc.Faults[:0]
	for _, f := range sc.Faults {
		if m.aimedAt(f, sc.Replicas) != nil {
			k, target, ok := m.draw(f.Kind, sc.Replicas)
			if !ok {
				continue
			}
			f.Target, f.Params = target, k
		}
		kept = append(kept, f)
	}
	sc.Faults = kept
}

// normalise orders the faults and numbers them f1, f2, … as the generator
// does; failpoint faults are armed at start (AfterOrders 0).
func (m *Mutator) normalise(sc *scenarios.Scenario) {
	for i := range sc.Faults {
		if k, err := sc.Faults[i].Spec(); err == nil {
			if _, armed := k.(faults.StartArmed); armed {
				sc.Faults[i].AfterOrders = 0
			}
		}
	}
	// As the schedule generator orders them: positional faults in workload
	// order, event-triggered ones after them.
	sort.SliceStable(sc.Faults, func(i, j int) bool {
		a, b := sc.Faults[i].Trigger != nil, sc.Faults[j].Trigger != nil
		if a != b {
			return !a
		}
		return sc.Faults[i].AfterOrders < sc.Faults[j].AfterOrders
	})
	for i := range sc.Faults {
		sc.Faults[i].ID = fmt.Sprintf("f%d", i+1)
	}
}

// Valid reports why sc cannot be run against the catalogue's target: a
// fault whose parameters its kind refuses (the registry decodes them again
// from JSON, as loading scenario.json does), or that aims at a link,
// instance or failpoint the run does not have, or a workload that names a
// client it does not start.
func (m *Mutator) Valid(sc scenarios.Scenario) error {
	if len(sc.Workload.Sagas) == 0 {
		return fmt.Errorf("no saga")
	}
	for i, o := range sc.Workload.Sagas {
		if o.Client < 0 || o.Client >= sc.Workload.Clients {
			return fmt.Errorf("saga %d: client %d of %d", i+1, o.Client, sc.Workload.Clients)
		}
		var body any
		if json.Unmarshal(o.Body, &body) != nil {
			return fmt.Errorf("saga %d: body is not JSON", i+1)
		}
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	var again scenarios.Scenario
	if err := json.Unmarshal(b, &again); err != nil {
		return err
	}
	for _, f := range again.Faults {
		if err := m.aimedAt(f, sc.Replicas); err != nil {
			return fmt.Errorf("fault %s (%s): %w", f.ID, f.Kind, err)
		}
	}
	return nil
}

// aimedAt reports why f's target is not something a run with replicas has.
func (m *Mutator) aimedAt(f scenarios.Fault, replicas map[string]int) error {
	k, err := f.Spec()
	if err != nil {
		return err
	}
	insts := m.instances(replicas)
	if a, ok := k.(faults.StartArmed); ok {
		inst, fp, _, _ := a.Arm(f.View())
		if !slices.Contains(insts, inst) {
			return fmt.Errorf("arms %s, which the run does not start", inst)
		}
		for _, d := range m.Catalog.Failpoints {
			if d.Name == fp && d.Kind == "marker" {
				return fmt.Errorf("%s is a marker: it cannot be armed", fp)
			}
			if d.Name == fp {
				return nil
			}
		}
		return fmt.Errorf("failpoint %s is not declared", fp)
	}
	if f.Target == "" || slices.Contains(insts, f.Target) || slices.Contains(m.Catalog.Links(replicas), f.Target) || slices.Contains(m.Catalog.Ambiguous, f.Target) {
		return nil
	}
	return fmt.Errorf("no link or instance %q in a run with replicas %v", f.Target, replicas)
}

func (m *Mutator) instances(replicas map[string]int) []string {
	var out []string
	for _, p := range m.Catalog.Processes {
		n := p.Replicas
		if r, ok := replicas[p.Name]; ok {
			n = r
		}
		out = append(out, scenarios.Instances(p.Name, n)...)
	}
	return out
}

func (m *Mutator) process(name string) (scenarios.Process, bool) {
	for _, p := range m.Catalog.Processes {
		if p.Name == name {
			return p, true
		}
	}
	return scenarios.Process{}, false
}

// aim is what a run with replicas offers a fault: the generator's own view.
func (m *Mutator) aim(replicas map[string]int) faults.Aim { return m.Catalog.Aim(m.Spec, replicas) }

// outcomeField is a top-level field of the workload's body template that
// chooses a world outcome (the order domain's card).
type outcomeField struct {
	name string
	spec models.OutcomeSpec
}

func (m *Mutator) outcomeFields() []outcomeField {
	d := m.Catalog.Domain
	if d == nil || d.Body == nil || d.Body.Kind != models.TObject {
		return nil
	}
	var out []outcomeField
	for _, f := range d.Body.Fields {
		if f.Node != nil && f.Node.Kind == models.TOutcome && f.Node.Outcome != nil {
			out = append(out, outcomeField{name: f.Name, spec: *f.Node.Outcome})
		}
	}
	return out
}

// setField sets a top-level string field of a JSON object body, keeping
// the other fields as they are; it reports whether the body changed.
func setField(body *json.RawMessage, name, value string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(*body, &obj) != nil || obj == nil {
		return false
	}
	v, _ := json.Marshal(value)
	if string(obj[name]) == string(v) {
		return false
	}
	obj[name] = v
	b, err := json.Marshal(obj)
	if err != nil {
		return false
	}
	*body = b
	return true
}

// rescale moves order-count triggers from a workload of from orders to one
// of to orders, keeping their relative position.
func rescale(fs []scenarios.Fault, to, from int) {
	if from <= 0 || to == from {
		return
	}
	for i := range fs {
		MoveOrderTriggers(&fs[i], func(p int) int { return min(p*to/from, max(0, to-1)) })
	}
}

// shiftEvent moves an event-triggered fault to another occurrence of its
// event (the count: the n-th charge, the n-th ReserveStock on its way, the
// n-th line of a marker) or by another delay after it.
func (m *Mutator) shiftEvent(f *scenarios.Fault) (string, bool) {
	t := *f.Trigger
	if m.Rand.IntN(2) == 0 {
		d := 1 + m.Rand.IntN(3)
		if m.Rand.IntN(2) == 0 && t.Count > d {
			d = -d
		}
		t.Count += d
		f.Trigger = &t
		return fmt.Sprintf("shift %s event #%d→#%d", f.ID, t.Count-d, t.Count), true
	}
	old := t.Delay.D()
	var d time.Duration
	switch m.Rand.IntN(3) {
	case 0:
		d = 0
	case 1:
		d = time.Duration(10+m.Rand.IntN(490)) * time.Millisecond
	default:
		d = max(10*time.Millisecond, time.Duration(float64(old)*math.Exp2(m.Rand.Float64()*4-2))).Round(time.Millisecond)
	}
	t.Delay = scenarios.Duration(d)
	f.Trigger = &t
	return fmt.Sprintf("shift %s delay %v→%v", f.ID, old, d), d != old
}

// clone deep-copies a scenario through its JSON form (the form a corpus
// keeps), which also decodes every fault's parameters again.
func clone(sc scenarios.Scenario) (scenarios.Scenario, error) {
	var out scenarios.Scenario
	b, err := json.Marshal(sc)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

func cloneFault(f scenarios.Fault) (scenarios.Fault, error) {
	var out scenarios.Fault
	b, err := json.Marshal(f)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.TrimSpace(s)
}

// ValidFor reports why a concrete scenario cannot run against the target
// the catalogue describes (Mutator.Valid without a spec).
func ValidFor(cat scenarios.Catalog, sc scenarios.Scenario) error {
	m := &Mutator{Catalog: cat}
	return m.Valid(sc)
}

// MoveOrderTriggers moves every workload position a fault waits for — its
// AfterOrders, an orders trigger's count, an event trigger's fallback
// position — through move. An event trigger's own count (the n-th world
// effect, record or marker line) is left alone: it counts events, not
// sagas. The trigger is copied first, so a shallow copy of the fault does
// not change the original's.
func MoveOrderTriggers(f *scenarios.Fault, move func(int) int) {
	f.AfterOrders = move(f.AfterOrders)
	if f.Trigger == nil {
		return
	}
	t := *f.Trigger
	if t.On == scenarios.TriggerOrders {
		t.Count = move(t.Count)
	}
	if t.Fallback > 0 {
		t.Fallback = max(1, move(t.Fallback))
	}
	f.Trigger = &t
}
