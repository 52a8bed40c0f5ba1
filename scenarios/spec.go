package scenarios

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// Spec is a named scenario file: the ranges the generator draws a concrete
// Scenario from. See scenarios/named/*.json.
type Spec struct {
	Name        string `json:"name"`
	Description string `json:"description"`

	// Sagas is how many sagas the clients start ("orders" in older
	// files); Clients how many clients start them.
	Sagas   Range `json:"sagas"`
	Clients Range `json:"clients"`
	// ResourceKeys and ResourceInitial, when set, replace the ranges every
	// counted resource of the target draws its number of keys and each
	// key's initial amount from (few keys and little of each: contention).
	ResourceKeys    *Range `json:"resource_keys,omitempty"`
	ResourceInitial *Range `json:"resource_initial,omitempty"`
	// Params replace the target's named ranges (a range with "param" in
	// its workload body template or its resources; the order domain names
	// four). An older file's top-level range of another name is read as a
	// param.
	Params map[string]Range `json:"params,omitempty"`

	// Rates are probabilities per saga. DeclineRate and AmbiguousRate are
	// the rates of the outcome tokens each outcome field of the body draws
	// (decline; ambiguous_500 or ambiguous_hang, half each).
	DeclineRate   float64 `json:"decline_rate"`
	AmbiguousRate float64 `json:"ambiguous_rate"`
	DuplicateRate float64 `json:"duplicate_rate"` // same key sent twice back to back
	BurstRate     float64 `json:"burst_rate"`     // saga started with no gap
	RetryUnknown  int     `json:"retry_unknown"`  // client retries after an unknown outcome
	GapMS         Range   `json:"gap_ms"`
	// Duration, when set, is how long the workload lasts: each client's
	// gaps are drawn (uniformly) so that its sagas spread over about this
	// long, long enough to span many step timeouts; gap_ms is then unused.
	// --scale scales it with the number of sagas.
	Duration Duration `json:"duration,omitempty"`

	Relays Range      `json:"relays"`
	Faults FaultRange `json:"faults"`
	// Schedule, when set, draws the fault plan over the whole workload
	// (schedule.go): rounds, uniform positions, long windows, faults aimed
	// at saga moments, both directions of a link. Without it the plan is
	// drawn as older scenarios drew it (and replays the same).
	Schedule *Schedule `json:"schedule,omitempty"`
	// Swarm, when set, enables a random subset of fault kinds, components
	// and workload features per seed (swarm.go).
	Swarm *Swarm `json:"swarm,omitempty"`
	// Races are the workload's request races (races.go).
	Races  *Races `json:"races,omitempty"`
	Limits Limits `json:"limits"`

	// procs, when set (by a swarm draw), is the set of processes faults may
	// aim at; scale is the factor Scaled applied.
	procs map[string]bool
	scale float64
}

// MaxOrders bounds a scenario's sagas (the soak scenario has 10,000).
const MaxOrders = 1_000_000

// Range is an inclusive integer range.
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// FaultRange says which faults a scenario may plan.
type FaultRange struct {
	Count Range `json:"count"`
	// Kinds are the kinds drawn from (a kind listed twice is drawn twice
	// as often); "*" is every registered kind.
	Kinds []string `json:"kinds"`
	// Patterns (path.Match syntax) over link names ("relay-*→kafka"),
	// component instances ("relay-*") and failpoint names ("relay.*").
	Links      []string `json:"links,omitempty"`
	Components []string `json:"components,omitempty"`
	Failpoints []string `json:"failpoints,omitempty"`
	DurationMS Range    `json:"duration_ms"`
	// Params fixes parameters per kind instead of drawing them, e.g.
	// {"latency": {"stream": "upstream"}}; `sagachaos list faults` lists
	// each kind's parameters.
	Params map[string]json.RawMessage `json:"params,omitempty"`
}

//go:embed named/*.json
var namedFS embed.FS

// SpecError is a scenario file that cannot be used: it names the file, the
// field and the problem in one line.
type SpecError struct {
	File, Field, Problem string
}

func (e *SpecError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("scenario %s: %s", e.File, e.Problem)
	}
	return fmt.Sprintf("scenario %s: field %s: %s", e.File, e.Field, e.Problem)
}

// ErrUnknownScenario is returned for a name that is neither a named scenario
// nor a file.
var ErrUnknownScenario = errors.New("unknown scenario")

// Names lists the named scenarios, sorted.
func Names() []string {
	ents, _ := namedFS.ReadDir("named")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// Load finds a scenario by name (one of Names) or by path to a .json file.
func Load(nameOrPath string) (*Spec, error) {
	if strings.HasSuffix(nameOrPath, ".json") || strings.ContainsRune(nameOrPath, '/') {
		b, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, &SpecError{File: nameOrPath, Problem: err.Error()}
		}
		return ParseSpec(nameOrPath, b)
	}
	b, err := namedFS.ReadFile("named/" + nameOrPath + ".json")
	if err != nil {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownScenario, nameOrPath, strings.Join(Names(), ", "))
	}
	return ParseSpec("scenarios/named/"+nameOrPath+".json", b)
}

// ParseSpec decodes and validates a scenario file; file names it in errors.
func ParseSpec(file string, b []byte) (*Spec, error) {
	b = legacySpec(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, &SpecError{File: file, Field: jsonField(err), Problem: jsonProblem(err)}
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return nil, &SpecError{File: file, Problem: "trailing data after the JSON object"}
	}
	if err := s.validate(); err != nil {
		err.File = file
		return nil, err
	}
	return &s, nil
}

func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if m := err.Error(); strings.HasPrefix(m, "json: unknown field ") {
		return strings.Trim(strings.TrimPrefix(m, "json: unknown field "), `"`)
	}
	return ""
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return "unknown field"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "malformed JSON: unexpected end of file"
	}
	return err.Error()
}

func (s *Spec) validate() *SpecError {
	bad := func(field, format string, a ...any) *SpecError {
		return &SpecError{Field: field, Problem: fmt.Sprintf(format, a...)}
	}
	if s.Name == "" {
		return bad("name", "empty")
	}
	// The upper bounds keep a typo from asking for a run no machine can do
	// (two billion orders are generated in memory before the run starts).
	ranges := []struct {
		field    string
		r        Range
		min, max int
	}{
		{"sagas", s.Sagas, 1, MaxOrders}, {"clients", s.Clients, 1, 1000},
		{"gap_ms", s.GapMS, 0, 3_600_000}, {"relays", s.Relays, 1, 64},
		{"faults.count", s.Faults.Count, 0, 10_000}, {"faults.duration_ms", s.Faults.DurationMS, 0, 86_400_000},
	}
	type bounded = struct {
		field    string
		r        Range
		min, max int
	}
	if s.ResourceKeys != nil {
		ranges = append(ranges, bounded{"resource_keys", *s.ResourceKeys, 1, MaxKeys})
	}
	if s.ResourceInitial != nil {
		ranges = append(ranges, bounded{"resource_initial", *s.ResourceInitial, 0, 1_000_000_000})
	}
	for _, k := range sortedParams(s.Params) {
		ranges = append(ranges, bounded{"params." + k, s.Params[k], 0, 1_000_000_000})
	}
	for _, r := range ranges {
		if r.r.Min < r.min {
			return bad(r.field+".min", "%d is below %d", r.r.Min, r.min)
		}
		if r.r.Max < r.r.Min {
			return bad(r.field, "max %d is below min %d", r.r.Max, r.r.Min)
		}
		if r.r.Max > r.max {
			return bad(r.field+".max", "%d is above %d", r.r.Max, r.max)
		}
	}
	for _, r := range []struct {
		field string
		v     float64
	}{{"decline_rate", s.DeclineRate}, {"ambiguous_rate", s.AmbiguousRate}, {"duplicate_rate", s.DuplicateRate}, {"burst_rate", s.BurstRate}} {
		if r.v < 0 || r.v > 1 {
			return bad(r.field, "%v is not a probability in [0, 1]", r.v)
		}
	}
	if s.RetryUnknown < 0 {
		return bad("retry_unknown", "%d is negative", s.RetryUnknown)
	}
	if slices.Contains(s.Faults.Kinds, "*") {
		// Every registered kind: a general scenario picks up new kinds.
		var ks []string
		for _, k := range s.Faults.Kinds {
			if k != "*" {
				ks = append(ks, k)
			}
		}
		s.Faults.Kinds = append(ks, faults.Names()...)
	}
	for i, k := range s.Faults.Kinds {
		if _, err := faults.New(k); err != nil {
			return bad(fmt.Sprintf("faults.kinds[%d]", i), "%v", err)
		}
	}
	kinds := make([]string, 0, len(s.Faults.Params))
	for k := range s.Faults.Params {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, name := range kinds {
		if err := checkFixedParams(name, s.Faults.Params[name]); err != nil {
			return err
		}
	}
	if s.Faults.Count.Max > 0 && len(s.Faults.Kinds) == 0 {
		return bad("faults.kinds", "faults.count allows faults but no kind is listed")
	}
	for field, pats := range map[string][]string{"faults.links": s.Faults.Links, "faults.components": s.Faults.Components, "faults.failpoints": s.Faults.Failpoints} {
		for i, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				return bad(fmt.Sprintf("%s[%d]", field, i), "bad pattern %q: %v", p, err)
			}
		}
		if i, problem := checkSelectors(pats, field == "faults.links"); i >= 0 {
			return bad(fmt.Sprintf("%s[%d]", field, i), "%s", problem)
		}
	}
	if s.Duration < 0 {
		return bad("duration", "negative")
	}
	if s.Schedule != nil {
		if err := s.Schedule.validate(); err != nil {
			return err
		}
	}
	if s.Swarm != nil {
		if err := s.Swarm.validate(); err != nil {
			return err
		}
	}
	if s.Races != nil {
		if err := s.Races.validate(); err != nil {
			return err
		}
	}
	if s.Limits.TimeLimit <= 0 {
		return bad("limits.time_limit", "must be positive (e.g. \"120s\")")
	}
	if s.Limits.Quiesce <= 0 {
		return bad("limits.quiesce", "must be positive (e.g. \"60s\")")
	}
	if s.Limits.ClientTimeout <= 0 {
		return bad("limits.client_timeout", "must be positive (e.g. \"3s\")")
	}
	if s.Limits.Settle < 0 {
		return bad("limits.settle", "must not be negative (e.g. \"2s\"; omit for the default)")
	}
	if s.Limits.StuckTimeouts < 0 {
		return bad("limits.stuck_timeouts", "must not be negative (omit for the default, 3)")
	}
	return nil
}

// checkFixedParams validates the parameters a spec fixes for a kind: laid
// over a drawn example of the kind, they must name real parameters and pass
// the kind's validation.
func checkFixedParams(name string, raw json.RawMessage) *SpecError {
	field := "faults.params." + name
	k, _, err := faults.Example(name)
	if err == nil {
		err = faults.Overlay(k, raw)
	}
	if err == nil {
		err = k.Validate()
	}
	var pe *faults.ParamError
	if errors.As(err, &pe) {
		return &SpecError{Field: field + "." + pe.Field, Problem: pe.Problem}
	}
	if err != nil {
		return &SpecError{Field: field, Problem: err.Error()}
	}
	return nil
}

func sortedParams(m map[string]Range) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// legacySpec rewrites an older scenario file into today's shape: "orders"
// is "sagas", and a top-level field that is no field of Spec but holds a
// range ({"min", "max"}) is a param of that name (an older file's order
// ranges are the order domain's params). Anything else is left for the
// strict decoder to report.
func legacySpec(b []byte) []byte {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return b
	}
	changed := false
	if o, ok := raw["orders"]; ok {
		if _, has := raw["sagas"]; !has {
			raw["sagas"] = o
		}
		delete(raw, "orders")
		changed = true
	}
	known := map[string]bool{}
	t := reflect.TypeOf(Spec{})
	for i := 0; i < t.NumField(); i++ {
		known[strings.Split(t.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	params := map[string]json.RawMessage{}
	if p, ok := raw["params"]; ok && json.Unmarshal(p, &params) != nil {
		return b
	}
	for k, v := range raw {
		if known[k] {
			continue
		}
		var r map[string]int
		if json.Unmarshal(v, &r) != nil || len(r) != 2 {
			continue
		}
		if _, ok := r["min"]; !ok {
			continue
		}
		if _, ok := r["max"]; !ok {
			continue
		}
		if _, has := params[k]; !has {
			params[k] = v
		}
		delete(raw, k)
		changed = true
	}
	if !changed {
		return b
	}
	if len(params) > 0 {
		raw["params"], _ = json.Marshal(params)
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return b
	}
	return out
}
