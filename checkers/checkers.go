package checkers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// Checker proves or disproves one invariant over a history.
type Checker interface {
	Name() string
	Check(h *models.History) models.CheckResult
}

// IndexChecker is a Checker that can also run on a prepared Index, so that
// CheckAll digests the history once for the whole catalogue.
type IndexChecker interface {
	Checker
	CheckIndex(ix *Index) models.CheckResult
}

// Description says what a checker proves and from what, for
// `sagachaos list checkers` and the report. Rules are the named rules a
// checker owns beyond its headline invariant (kind: statement).
type Description struct {
	Name      string   `json:"name"`
	Invariant string   `json:"invariant"`
	Evidence  string   `json:"evidence"`
	Rules     []string `json:"rules,omitempty"`
}

// entry is one catalogue line: a checker's description and its function.
type entry struct {
	Description
	check func(ix *Index, b *builder)
}

// catalogue is the stable order of All, Describe and verdict.json.
var catalogue = []entry{
	{Description{"saga-terminates", "every accepted order ends in the spec's success or failure status, and announces it with the spec's terminal event", "client ops, final order states, quiesce (with its stuck-saga watch), component lifecycle, Kafka log, outbox rows",
		[]string{
			"stuck: a final state that is not terminal, or an order still pending when the quiescence deadline passed",
			"stuck (proved early): a pending saga unchanged (status, trail, outbox rows of it) for k step timeouts after heal with every component healthy — its owner never timed the step out",
			"missing-terminal-event: a saga ended in a terminal status whose spec event is neither in the complete log nor committed in any outbox",
		}}, checkTerminates},
	{Description{"all-or-nothing", "success ⇒ every step's effect happened (net of compensations); failure ⇒ no step effect remains", "world effects, final order states", nil}, checkAllOrNothing},
	{Description{"no-double-effect", "at most one non-replay world effect of each spec action per order", "world effects", nil}, checkNoDoubleEffect},
	{Description{"compensation-order", "compensations run in reverse step order, never for a step that never ran, and no forward action follows its compensation", "world effects (real-time order), event seqs of one source", nil}, checkCompensationOrder},
	{Description{"pivot", "a pivot effect is never compensated, nothing after the pivot happens before it, and a pivoted order ends in success", "world effects, final order states", nil}, checkPivot},
	{Description{"no-lost-event", "every committed outbox row reaches Kafka at least once", "outbox rows, Kafka log (complete snapshot)", nil}, checkNoLostEvent},
	{Description{"no-phantom-event", "every Kafka record matches a committed outbox row", "Kafka log, outbox rows (complete snapshot)", nil}, checkNoPhantomEvent},
	{Description{"per-aggregate-order", "per source and aggregate, records first appear in a partition in seq order, are keyed by the aggregate, each consumer applies them in seq order, and no seq is skipped", "Kafka log, envelope seq, applied records, outbox rows",
		[]string{
			"seq-gap: a committed row of seq k absent from the complete log while a higher seq of the same source, aggregate and topic is in it",
			"vanished-row: a seq missing from both the outbox and the complete log below a seq of the same source and aggregate that exists (a row may be deleted only after it was published); not applicable when the records carry no seq (seq from the outbox)",
		}}, checkPerAggregateOrder},
	{Description{"conservation", "stock is never negative, initial = available + reserved, reserved = held by approved orders, money at the gateway = approved totals", "initial stock, final stock, world effects, final order states", nil}, checkConservation},
	{Description{"client-idempotency", "one Idempotency-Key maps to at most one order", "client ok replies, final order states", nil}, checkClientIdempotency},
	{Description{"no-lost-delivery", "every record of a topic a declared consumer consumes, of a type it handles, below its group's committed offset at observation, is in that consumer's applied records", "target declaration, Kafka log, committed offsets, applied records", nil}, checkNoLostDelivery},
	{Description{"outbox-drains", "after heal, no committed row stays unpublished (and out of the log) through a settle window in which every relay was healthy and the outbox idle", "drain watch, component lifecycle, healed, Kafka log", nil}, checkOutboxDrains},
}

// Describe lists every checker in catalogue order.
func Describe() []Description {
	out := make([]Description, len(catalogue))
	for i, e := range catalogue {
		out[i] = e.Description
	}
	return out
}

// checker adapts a catalogue entry to the Checker interface for one spec.
type checker struct {
	e    entry
	spec models.SagaSpec
}

func (c checker) Name() string { return c.e.Name }

func (c checker) Check(h *models.History) models.CheckResult {
	return c.CheckIndex(NewIndex(h, c.spec))
}

func (c checker) CheckIndex(ix *Index) models.CheckResult {
	if why := ix.notApplicable(c.e.Name); why != "" {
		return models.CheckResult{Checker: c.e.Name, Status: models.Valid, NotApplicable: why}
	}
	b := &builder{name: c.e.Name, stats: map[string]int64{}}
	c.e.check(ix, b)
	return b.result()
}

// All returns the catalogue of checkers for spec, in a stable order.
func All(spec models.SagaSpec) []Checker {
	out := make([]Checker, len(catalogue))
	for i, e := range catalogue {
		out[i] = checker{e: e, spec: spec}
	}
	return out
}

// Lookup finds a checker by name.
func Lookup(name string, spec models.SagaSpec) (Checker, bool) {
	for _, e := range catalogue {
		if e.Name == name {
			return checker{e: e, spec: spec}, true
		}
	}
	return nil, false
}

// Names lists the checker names in catalogue order.
func Names() []string {
	out := make([]string, len(catalogue))
	for i, e := range catalogue {
		out[i] = e.Name
	}
	return out
}

// CheckAll runs the whole catalogue over h, digesting it once, and composes
// the verdict. Run comes from the history's run-start op when present; the
// verdict records h.Digest, so it names the bytes it judged.
//
// It also applies the verdict's preconditions (complete.go): a history that
// does not prove it is complete (Index.Incomplete), or in which nothing
// happened to judge (Index.Vacuous), has no valid result — each becomes
// unknown and says why. A checker run alone (Checker.Check) judges only its
// invariant.
func CheckAll(h *models.History, spec models.SagaSpec) models.Verdict {
	ix := NewIndex(h, spec)
	v := models.Verdict{Version: models.VerdictVersion, Ops: len(ix.Ops), HistoryDigest: h.Digest, Interrupted: ix.Interrupted}
	if ix.Run != nil {
		v.Run = *ix.Run
	}
	incomplete, vacuous := ix.Incomplete(), ix.Vacuous()
	for _, c := range All(spec) {
		r := c.(IndexChecker).CheckIndex(ix)
		ix.preconditions(&r, incomplete, vacuous)
		v.Results = append(v.Results, r)
	}
	v.Status = models.Compose(v.Results)
	return v
}

// maxEvidence bounds the op indices one violation carries; the message says
// when more exist.
const maxEvidence = 64

// builder accumulates one checker's result.
type builder struct {
	name     string
	viol     []models.Violation
	unknowns []string
	nUnknown int
	stats    map[string]int64
	na       string
	ruleNA   map[string]string
}

// notApplicable records that the invariant has nothing to judge.
func (b *builder) notApplicable(format string, args ...any) { b.na = fmt.Sprintf(format, args...) }

// ruleNotApplicable records that the rule of kind kind has nothing to judge
// in this history; the checker's other rules still do.
func (b *builder) ruleNotApplicable(kind, format string, args ...any) {
	if b.ruleNA == nil {
		b.ruleNA = map[string]string{}
	}
	b.ruleNA[kind] = fmt.Sprintf(format, args...)
}

// flag records a proven violation.
func (b *builder) flag(kind, order, msg string, ops ...int64) {
	clean := make([]int64, 0, len(ops))
	for _, o := range ops {
		if o >= 0 {
			clean = append(clean, o)
		}
	}
	sort.Slice(clean, func(i, j int) bool { return clean[i] < clean[j] })
	clean = dedup(clean)
	if len(clean) > maxEvidence {
		msg += fmt.Sprintf(" (first %d of %d proving ops)", maxEvidence, len(clean))
		clean = clean[:maxEvidence]
	}
	b.viol = append(b.viol, models.Violation{Checker: b.name, Kind: kind, Order: order, Message: msg, Ops: clean})
}

// unknown records that part of the invariant could not be decided; the
// first few reasons are kept verbatim, the rest counted.
func (b *builder) unknown(format string, args ...any) {
	b.nUnknown++
	if len(b.unknowns) < 3 {
		b.unknowns = append(b.unknowns, fmt.Sprintf(format, args...))
	}
}

func (b *builder) result() models.CheckResult {
	r := models.CheckResult{Checker: b.name, Status: models.Valid, Stats: b.stats}
	if b.nUnknown > 0 {
		s := strings.Join(b.unknowns, "; ")
		if b.nUnknown > len(b.unknowns) {
			s += fmt.Sprintf("; and %d more", b.nUnknown-len(b.unknowns))
		}
		r.Unknown = s
		r.Status = models.Unknown
	}
	if len(b.viol) > 0 {
		r.Status = models.Invalid
		r.Violations = b.viol
	}
	if r.Status == models.Valid {
		r.NotApplicable = b.na
	}
	if r.NotApplicable == "" {
		r.RulesNotApplicable = b.ruleNA
	}
	if len(r.Stats) == 0 {
		r.Stats = nil
	}
	return r
}

func dedup(s []int64) []int64 {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
