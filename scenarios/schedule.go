package scenarios

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// This file is the fault half of generation for scenarios with a
// Schedule: the plan spans the whole workload in rounds (fault, heal,
// fault …), positions are uniform over each round (not rapid's
// small-value bias), windows are long enough to cross step timeouts as
// often as not, part of the faults is aimed at saga moments (a world
// effect, a record on its way to a consumer, a marker or failpoint
// reached) through event triggers, and toxics act on either direction of
// a link. Everything drawn is in the scenario (scenario.json).

// Schedule shapes the fault plan of a general scenario.
type Schedule struct {
	// Rounds splits the workload into rounds: each round's positional
	// faults start at uniform positions in the round's first part, and
	// its last part (Heal) is left to heal. Overlapping faults compose.
	Rounds Range `json:"rounds"`
	// Heal is the fraction of each round in which no positional fault
	// starts (default 0.35).
	Heal float64 `json:"heal,omitempty"`
	// Aimed is the fraction of faults aimed at a saga moment with an event
	// trigger instead of an order count.
	Aimed float64 `json:"aimed"`
	// Windows is how window lengths are drawn from faults.duration_ms:
	// "uniform", or "log" (log-uniform: a window of 4–8 s is as likely as
	// one of 0.5–1 s, so windows that cross a step timeout are common).
	Windows string `json:"windows,omitempty"`
	// Directions draws the direction (upstream: the requests, downstream:
	// the answers) of every kind with a stream parameter; off: the kind's
	// default.
	Directions bool `json:"directions,omitempty"`
	// Actions are the actions a failpoint fault draws from (crash, error,
	// sleep); empty: crash.
	Actions []string `json:"actions,omitempty"`
	// DelayMS is the delay of an aimed fault after its event, drawn for
	// half of them (the other half start at once).
	DelayMS Range `json:"delay_ms,omitempty"`
	// Armed is how many failpoints (faults of a kind armed before start)
	// are armed beyond faults.count, when such a kind is enabled: each is
	// cheap (it fires once, at its hit) and lands exactly at a spot the
	// target declared dangerous.
	Armed Range `json:"armed,omitempty"`
}

func (s *Schedule) validate() *SpecError {
	bad := func(field, format string, a ...any) *SpecError {
		return &SpecError{Field: "schedule." + field, Problem: fmt.Sprintf(format, a...)}
	}
	if s.Rounds.Min < 1 || s.Rounds.Max < s.Rounds.Min {
		return bad("rounds", "want 1 ≤ min ≤ max, got %d–%d", s.Rounds.Min, s.Rounds.Max)
	}
	if s.Heal < 0 || s.Heal >= 1 {
		return bad("heal", "%v is not in [0, 1)", s.Heal)
	}
	if s.Aimed < 0 || s.Aimed > 1 {
		return bad("aimed", "%v is not a probability in [0, 1]", s.Aimed)
	}
	if s.Windows != "" && s.Windows != "uniform" && s.Windows != "log" {
		return bad("windows", "%q is not uniform or log", s.Windows)
	}
	for i, a := range s.Actions {
		if a != "crash" && a != "error" && a != "sleep" {
			return bad(fmt.Sprintf("actions[%d]", i), "%q is not crash, error or sleep", a)
		}
	}
	if s.DelayMS.Min < 0 || s.DelayMS.Max < s.DelayMS.Min {
		return bad("delay_ms", "want 0 ≤ min ≤ max, got %d–%d", s.DelayMS.Min, s.DelayMS.Max)
	}
	if s.Armed.Min < 0 || s.Armed.Max < s.Armed.Min || s.Armed.Max > 64 {
		return bad("armed", "want 0 ≤ min ≤ max ≤ 64, got %d–%d", s.Armed.Min, s.Armed.Max)
	}
	return nil
}

// fraction draws a number in [0, 1) uniformly from 16 one-bit draws: rapid
// draws a bool from one bit, without the small-value bias of its integer
// draws, and shrinking lowers the bits — an earlier position, a shorter
// window, a smaller count — so a shrunk plan still means something.
func fraction(t *rapid.T, label string) float64 {
	var v uint32
	for i := 0; i < 16; i++ {
		v <<= 1
		if rapid.Bool().Draw(t, label) {
			v |= 1
		}
	}
	return float64(v) / (1 << 16)
}

// uniformInt draws an integer in [lo, hi] uniformly.
func uniformInt(t *rapid.T, lo, hi int, label string) int {
	if hi <= lo {
		return lo
	}
	return lo + min(hi-lo, int(fraction(t, label)*float64(hi-lo+1)))
}

// logInt draws an integer in [lo, hi] log-uniformly (lo ≥ 1): as many
// draws between lo and 2·lo as between hi/2 and hi.
func logInt(t *rapid.T, lo, hi int, label string) int {
	lo = max(lo, 1)
	if hi <= lo {
		return lo
	}
	x := float64(lo) * math.Pow(float64(hi+1)/float64(lo), fraction(t, label))
	return min(hi, max(lo, int(x)))
}

// coin draws true with probability p, uniformly (unlike chance, whose
// integer draw favours "no"); like chance it shrinks towards "no": fewer
// features, fewer races, positional rather than aimed faults.
func coin(t *rapid.T, p float64, label string) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	return fraction(t, label) >= 1-p
}

// window draws a fault window from the spec's duration range.
func (s *Schedule) window(t *rapid.T, r Range) Duration {
	ms := uniformInt(t, r.Min, r.Max, "window")
	if s.Windows == "log" && r.Min > 0 {
		ms = logInt(t, r.Min, r.Max, "window")
	}
	return Duration(int64(ms) * 1e6)
}

// moment is a saga moment a fault can be aimed at: an event trigger
// (without its count) and the process it is about.
type moment struct {
	family    string // "saga", "record", "marker", "failpoint"
	trig      Trigger
	aim       string
	component []string // processes the fault is best aimed at
	rare      bool     // count drawn log-uniformly over a short range
}

// moments lists the saga moments the catalog offers: every step and
// compensation of the saga (by its world effect, or by its event as a
// record its consumer receives), declines of the pivot's effect, every
// record type a process consumes, every marker and failpoint.
func (c Catalog) moments() []moment {
	var out []moment
	consumerOf := map[string][]string{} // record type → consuming processes
	for _, p := range c.Processes {
		for _, ty := range p.Types {
			consumerOf[ty] = append(consumerOf[ty], p.Name)
		}
	}
	known := map[string]bool{}
	for _, p := range c.Processes {
		known[p.Name] = true
	}
	if c.Saga != nil {
		for _, st := range c.Saga.Steps {
			add := func(name, event string, eff *effectRef, comp bool) {
				what := "step " + name
				if comp {
					what = "compensation " + name
				}
				var aimAt []string
				if known[st.Service] {
					aimAt = append(aimAt, st.Service)
				}
				if eff != nil {
					out = append(out, moment{family: "saga", aim: what, component: aimAt, rare: comp,
						trig: Trigger{On: TriggerEffect, Proc: eff.proc, F: eff.f, Match: eff.match}})
					if st.Kind == models.Pivot && !comp && eff.match["status"] != "" {
						out = append(out, moment{family: "saga", aim: what + " declined", component: aimAt, rare: true,
							trig: Trigger{On: TriggerEffect, Proc: eff.proc, F: eff.f, Match: map[string]string{"status": "declined"}}})
					}
					return
				}
				for _, cp := range consumerOf[event] {
					out = append(out, moment{family: "saga", aim: what, component: uniq(append(slices.Clone(aimAt), cp)), rare: comp,
						trig: Trigger{On: TriggerRecord, Component: cp, Type: event}})
				}
				if len(consumerOf[event]) == 0 && event != "" {
					// An event nobody consumes (OrderCreated): its record on
					// any topic.
					out = append(out, moment{family: "saga", aim: what, component: aimAt, rare: comp,
						trig: Trigger{On: TriggerRecord, Type: event}})
				}
			}
			add(st.Name, st.Event, effectOf(st.Effect), false)
			if st.Compensation != nil && st.Kind != models.Pivot {
				add(st.Compensation.Name, st.Compensation.Event, effectOf(st.Compensation.Effect), true)
			}
		}
	}
	for _, p := range c.Processes {
		for _, ty := range p.Types {
			out = append(out, moment{family: "record", aim: "consumes " + ty, component: []string{p.Name}, rare: true,
				trig: Trigger{On: TriggerRecord, Component: p.Name, Type: ty}})
		}
	}
	for _, fp := range c.Failpoints {
		fam := "failpoint"
		if fp.Kind == "marker" {
			fam = "marker"
		}
		var aimAt []string
		if known[fp.Component] {
			aimAt = []string{fp.Component}
		}
		out = append(out, moment{family: fam, aim: fam + " " + fp.Name, component: aimAt, rare: true,
			trig: Trigger{On: TriggerFailpoint, Point: fp.Name, Component: fp.Component}})
	}
	return out
}

type effectRef struct {
	proc, f string
	match   map[string]string
}

func uniq(xs []string) []string {
	sort.Strings(xs)
	return slices.Compact(xs)
}

// families are drawn first (so 28 markers do not crowd out 7 saga steps),
// then a moment of the family.
var families = []struct {
	name   string
	weight float64
}{{"saga", 0.4}, {"record", 0.2}, {"marker", 0.25}, {"failpoint", 0.15}}

func drawMoment(t *rapid.T, ms []moment) (moment, bool) {
	byFam := map[string][]moment{}
	for _, m := range ms {
		byFam[m.family] = append(byFam[m.family], m)
	}
	total := 0.0
	for _, f := range families {
		if len(byFam[f.name]) > 0 {
			total += f.weight
		}
	}
	if total == 0 {
		return moment{}, false
	}
	x := fraction(t, "family") * total
	for _, f := range families {
		list := byFam[f.name]
		if len(list) == 0 {
			continue
		}
		if x < f.weight || f.name == families[len(families)-1].name {
			return list[uniformInt(t, 0, len(list)-1, "moment")], true
		}
		x -= f.weight
	}
	// Rounding left x past the last family with moments.
	for i := len(families) - 1; i >= 0; i-- {
		if list := byFam[families[i].name]; len(list) > 0 {
			return list[uniformInt(t, 0, len(list)-1, "moment")], true
		}
	}
	return moment{}, false
}

// count draws how many events of a moment the trigger waits for: a
// forward step of the saga happens about once per order, so its count is
// uniform over most of the workload; rarer moments (compensations,
// declines, a record type, a marker) draw small counts more often.
func (m moment) count(t *rapid.T, nOrders int) int {
	switch {
	case m.family == "saga" && !m.rare:
		// Not every saga gets this far (stock runs out, cards are
		// declined): a third of the orders is a count most runs reach
		// before the fault's fallback position.
		return uniformInt(t, 1, max(1, nOrders*3/10), "count")
	case m.family == "failpoint":
		// A failpoint logs its first reach in each process's life: a
		// count of 2 waits for a restart.
		if coin(t, 0.2, "second-life") {
			return 2
		}
		return 1
	case m.family == "marker":
		return logInt(t, 1, 3, "count")
	default:
		return logInt(t, 1, max(2, nOrders/4), "count")
	}
}

// drawSchedule draws the fault plan of a scenario with a Schedule.
func drawSchedule(t *rapid.T, s *Spec, c Catalog, sc *Scenario) []Fault {
	sch := s.Schedule
	nOrders := len(sc.Workload.Sagas)
	nFaults := drawRange(t, s.Faults.Count, "faults")
	rounds := uniformInt(t, sch.Rounds.Min, sch.Rounds.Max, "rounds")
	heal := sch.Heal
	if heal == 0 {
		heal = 0.35
	}
	kinds := uniq(slices.Clone(s.Faults.Kinds))
	full := c.aim(s, sc.Replicas)
	ms := c.moments()
	var armedKinds []string
	for _, k := range kinds {
		if fk, err := faults.New(k); err == nil {
			if _, ok := fk.(faults.StartArmed); ok {
				armedKinds = append(armedKinds, k)
			}
		}
	}
	extra := 0
	if len(armedKinds) > 0 {
		extra = uniformInt(t, sch.Armed.Min, sch.Armed.Max, "armed")
	}
	var out []Fault
	for i := 0; i < nFaults+extra; i++ {
		var kind string
		if i < nFaults {
			kind = kinds[uniformInt(t, 0, len(kinds)-1, "kind")]
		} else {
			kind = armedKinds[uniformInt(t, 0, len(armedKinds)-1, "armed-kind")]
		}
		k, err := faults.New(kind)
		if err != nil {
			continue // ParseSpec refused unknown kinds already
		}
		_, armed := k.(faults.StartArmed)
		f := Fault{Kind: kind, Duration: sch.window(t, s.Faults.DurationMS)}
		aim := full
		if !armed && coin(t, sch.Aimed, "aimed") {
			if m, ok := drawMoment(t, ms); ok {
				trig := m.trig
				trig.Count = m.count(t, nOrders)
				trig.Fallback = max(1, int(float64(nOrders)*(0.5+0.45*fraction(t, "fallback"))))
				if sch.DelayMS.Max > 0 && coin(t, 0.5, "delayed") {
					trig.Delay = Duration(int64(uniformInt(t, sch.DelayMS.Min, sch.DelayMS.Max, "delay")) * 1e6)
				}
				f.Trigger, f.Aim = &trig, m.aim
				if len(m.component) > 0 && coin(t, 0.75, "at-moment") {
					comp := m.component[uniformInt(t, 0, len(m.component)-1, "component")]
					if a := onlyComponent(full, c, comp, sc.Replicas); !aimEmpty(a) {
						aim = a
					}
				}
			}
		}
		if f.Trigger == nil && !armed {
			r := uniformInt(t, 0, rounds-1, "round")
			pos := (float64(r) + fraction(t, "position")*(1-heal)) / float64(rounds)
			f.AfterOrders = min(nOrders-1, int(pos*float64(nOrders)))
			f.Round = r + 1
		}
		target, ok := k.Draw(t, aim)
		if !ok && f.Trigger != nil {
			target, ok = k.Draw(t, full) // the moment's component offers this kind nothing
		}
		if !ok {
			continue
		}
		if fixed := s.Faults.Params[kind]; fixed != nil {
			_ = faults.Overlay(k, fixed) // validated by ParseSpec
		}
		sch.drawParams(t, k, kind, s.Faults.Params[kind], nOrders, s.Faults.DurationMS)
		f.Target, f.Params = target, k
		out = append(out, f)
	}
	// Positional faults in workload order, aimed ones after them; ids in
	// that order.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Trigger != nil, out[j].Trigger != nil
		if a != b {
			return !a
		}
		return out[i].AfterOrders < out[j].AfterOrders
	})
	for i := range out {
		out[i].ID = fmt.Sprintf("f%d", i+1)
	}
	return out
}

// drawParams draws the parameters a schedule varies beyond the kind's own
// draw: the direction of a toxic, a failpoint's action and hit. A
// parameter the spec fixes is left alone.
func (sch *Schedule) drawParams(t *rapid.T, k faults.Kind, kind string, fixed json.RawMessage, nOrders int, windows Range) {
	var fixedNames map[string]json.RawMessage
	_ = json.Unmarshal(fixed, &fixedNames)
	has := map[string]bool{}
	for _, p := range faults.Params(k) {
		has[p.Name] = true
	}
	set := func(name string, v any) {
		if _, ok := fixedNames[name]; ok || !has[name] {
			return
		}
		b, _ := json.Marshal(map[string]any{name: v})
		_ = faults.Overlay(k, b)
	}
	if sch.Directions && has["stream"] {
		dir := faults.Downstream
		if coin(t, 0.5, "upstream") {
			dir = faults.Upstream
		}
		set("stream", dir)
	}
	if _, armed := k.(faults.StartArmed); armed {
		if len(sch.Actions) > 0 && has["action"] {
			a := sch.Actions[uniformInt(t, 0, len(sch.Actions)-1, "action")]
			if a == "sleep" {
				a = fmt.Sprintf("sleep(%v)", sch.window(t, windows).D())
			}
			set("action", a)
		}
		if has["hit"] {
			// A point hit about once per order: uniform over the run; a
			// rarer one (a timeout path, a cleanup): small hits.
			hit := logInt(t, 1, max(2, nOrders/2), "hit")
			if coin(t, 0.5, "hit-uniform") {
				hit = uniformInt(t, 1, max(1, nOrders*6/10), "hit")
			}
			set("hit", hit)
		}
	}
}

// onlyComponent is a restricted to the instances of process comp and
// their links (and the client's link when comp serves the API).
func onlyComponent(a faults.Aim, c Catalog, comp string, replicas map[string]int) faults.Aim {
	inst := c.instancesOf(replicas)[comp]
	mine := map[string]bool{}
	for _, in := range inst {
		mine[in] = true
	}
	var out faults.Aim
	for _, in := range a.Components {
		if mine[in] {
			out.Components = append(out.Components, in)
		}
	}
	for _, in := range a.Consumers {
		if mine[in] {
			out.Consumers = append(out.Consumers, in)
		}
	}
	for _, l := range a.Links {
		from, to, _ := strings.Cut(l, "→")
		if mine[from] || (from == "client" && to == comp) {
			out.Links = append(out.Links, l)
		}
	}
	return out
}

func aimEmpty(a faults.Aim) bool {
	return len(a.Components) == 0 && len(a.Links) == 0 && len(a.Consumers) == 0
}

func effectOf(e *models.EffectSpec) *effectRef {
	if e == nil {
		return nil
	}
	n := *e
	n.Normalize()
	return &effectRef{proc: n.Proc, f: n.F, match: n.Match}
}

// spread redraws the gaps of a workload with a Duration: each client's
// orders outside a burst get uniform gaps averaging Duration / their
// number, so every client's orders spread over about Duration and fault
// positions (order counts) map uniformly onto time.
func spread(t *rapid.T, s *Spec, sc *Scenario) {
	per := map[int]int{}
	for _, o := range sc.Workload.Sagas {
		if o.Gap > 0 {
			per[o.Client]++
		}
	}
	for i := range sc.Workload.Sagas {
		o := &sc.Workload.Sagas[i]
		if o.Gap == 0 {
			continue
		}
		mean := float64(s.Duration) / float64(per[o.Client])
		o.Gap = Duration(max(int64(time1ms), int64(2*mean*fraction(t, "gap"))))
	}
}

const time1ms = 1e6

// Scaled returns a copy of s for a shorter or longer run (--scale): the
// number of orders, the workload's duration, the number of faults and of
// rounds are multiplied by f (at least 1 of each that was at least 1);
// fault windows and limits are left alone, since they are about step
// timeouts, not about the length of the run.
func (s *Spec) Scaled(f float64) *Spec {
	if f <= 0 || f == 1 {
		return s
	}
	c := *s
	sc := func(r Range, floor int) Range {
		lo := max(floor, int(math.Round(float64(r.Min)*f)))
		hi := max(lo, int(math.Round(float64(r.Max)*f)))
		if r.Min < floor {
			lo = r.Min
		}
		return Range{Min: lo, Max: hi}
	}
	c.Sagas = sc(s.Sagas, 1)
	c.Duration = Duration(float64(s.Duration) * f)
	c.Faults.Count = sc(s.Faults.Count, min(1, s.Faults.Count.Min))
	if s.Schedule != nil {
		sch := *s.Schedule
		sch.Rounds = sc(s.Schedule.Rounds, 1)
		c.Schedule = &sch
	}
	c.scale = f
	return &c
}
