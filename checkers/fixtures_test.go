package checkers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// Golden fixtures: testdata/<checker>-<case>.<ok|bad|unknown>.jsonl.
//   - ok: the whole verdict is valid (every checker), whatever the prefix;
//     the prefix names the checker whose legal-but-tricky case it is;
//   - bad: the prefix checker is invalid with a violation naming o-victim;
//   - unknown: the prefix checker is unknown and no checker is invalid.
// They are written by the model in gen_test.go; `go test -run Fixtures
// -update` regenerates them (and the seed runs under testdata/runs/).

// fixture builds one golden history.
type fixture struct {
	file  string
	build func() *models.History
}

// forced builds a history from three random orders plus the given ones.
func forced(seed uint64, extra ...*plan) *models.History {
	ch := newRand(seed)
	stock, plans := randomPlans(ch, 3)
	for i, p := range extra {
		p.n = len(plans) + i
		if p.id == "" {
			p.id = victim
		}
		p.key = "k-" + strings.TrimPrefix(p.id, "o-")
		sku := "sku-" + p.id
		stock[sku] = 5
		p.items = []models.Item{{SKU: sku, Qty: 1}}
		p.total = 100
		if p.client == "" {
			p.client = clientOK
		}
	}
	h, _ := genHistory(ch, stock, append(plans, extra...))
	return h
}

func fixtures() []fixture {
	fs := []fixture{
		{"all-generated.ok.jsonl", func() *models.History {
			s, p := randomPlans(newRand(1), 10)
			h, _ := genHistory(newRand(2), s, p)
			return h
		}},
		{"all-empty.unknown.jsonl", func() *models.History { h, _ := genHistory(newRand(3), map[string]int64{"sku-1": 3}, nil); return h }},
		{"all-refused.unknown.jsonl", func() *models.History {
			h, _ := genHistory(newRand(30), map[string]int64{"sku-1": 3}, []*plan{
				{n: 0, id: "o-a", key: "k-a", items: []models.Item{{SKU: "sku-1", Qty: 1}}, client: clientRefused},
				{n: 1, id: "o-b", key: "k-b", items: []models.Item{{SKU: "sku-1", Qty: 1}}, client: clientNeverArrive},
			})
			return h
		}},
		{"no-lost-delivery-redelivered.ok.jsonl", func() *models.History {
			h := forced(31, &plan{dupAll: true})
			h.Ops = renumber(insertBefore(h.Ops, models.FHealed, mkOp(models.ProcNemesis, models.Info, "rewind", "", models.FaultRecord{ID: "f-rw", Kind: "rewind", Phase: models.PhaseInstant, Target: "inventory"})))
			return h
		}},
		{"no-lost-delivery-unhandled-type.ok.jsonl", func() *models.History { return forced(32, &plan{note: true}) }},
		{"no-lost-delivery-not-yet-committed.unknown.jsonl", func() *models.History {
			h := corrupt(newRand(33), corruptionNamed("lost-delivery"), 2)
			ev := findOp(h.Ops, func(o models.Op) bool { return o.Type == models.Event && o.F == "ReserveStock" && o.Order == victim })
			m := decodeMap(ev.Value)
			h.Ops = editValue(h.Ops, func(o models.Op) bool {
				return o.F == models.FConsumerOffsets && decodeMap(o.Value)["group"] == "inventory"
			}, func(c map[string]any) {
				for _, p := range c["partitions"].([]any) {
					p := p.(map[string]any)
					if p["topic"] == m["topic"] && p["partition"] == m["partition"] {
						p["committed"] = m["offset"]
					}
				}
				c["lag_free"] = false
			})
			return h
		}},
		{"no-lost-delivery-no-declaration.ok.jsonl", func() *models.History {
			h := forced(34, &plan{})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, func(o models.Op) bool { return o.F == models.FTarget }))
			return h
		}},
		{"outbox-drains-after-relay-restart.ok.jsonl", func() *models.History {
			h := forced(35, &plan{})
			d := findOp(h.Ops, func(o models.Op) bool { return o.F == models.FOutboxDrain })
			from := int64(decodeMap(d.Value)["from_t"].(float64))
			h.Ops = renumber(insertBefore(h.Ops, models.FOutboxDrain,
				lifeOp(models.FComponentExit, "relay-1", 2, from+100e6),
				lifeOp(models.FComponentStart, "relay-1", 3, from+200e6),
				lifeOp(models.FComponentHealthy, "relay-1", 3, from+300e6)))
			return h
		}},
		{"outbox-drains-delivered-unmarked.ok.jsonl", func() *models.History {
			// the relay published the row and has not marked it yet: in
			// the log, so delivered, whatever the watch says
			h := corrupt(newRand(36), corruption{mutate: func(ops []models.Op) []models.Op {
				var row map[string]any
				ops = editValue(ops, func(o models.Op) bool {
					return isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == "OrderApproved"
				}, func(m map[string]any) { m["published"] = false; row = m })
				return editValue(ops, func(o models.Op) bool { return o.F == models.FOutboxDrain && decodeMap(o.Value)["db"] == "orders" }, func(d map[string]any) {
					d["to_t"] = d["from_t"].(float64) + 5e9
					d["drained"] = false
					d["pending"] = []any{map[string]any{"id": row["id"], "event_id": row["event_id"], "aggregate": victim, "type": "OrderApproved", "first_seen_t": d["from_t"]}}
				})
			}}, 2)
			return h
		}},
		{"outbox-drains-relay-unhealthy.unknown.jsonl", func() *models.History {
			h := corrupt(newRand(37), corruptionNamed("stuck-row"), 2)
			d := findOp(h.Ops, func(o models.Op) bool { return o.F == models.FOutboxDrain })
			from := int64(decodeMap(d.Value)["from_t"].(float64))
			h.Ops = renumber(insertBefore(h.Ops, models.FOutboxDrain, lifeOp(models.FComponentExit, "relay-2", 2, from+100e6)))
			return h
		}},
		{"no-phantom-event-retention.unknown.jsonl", func() *models.History {
			// retention deleted the victim's first published rows of the
			// orders outbox: their records are in the log, so no seq
			// vanished, and the outbox is declared incomplete
			h := forced(38, &plan{noDup: true})
			n := 0
			h.Ops = slices.DeleteFunc(h.Ops, func(o models.Op) bool {
				if isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["db"] == "orders" && n < 3 {
					n++
					return true
				}
				return false
			})
			h.Ops = editValue(h.Ops, func(o models.Op) bool { return o.F == models.FOutboxSnapshot && decodeMap(o.Value)["db"] == "orders" },
				func(m map[string]any) { m["complete"] = false })
			h.Ops = renumber(recount(h.Ops))
			return h
		}},
		{"saga-terminates-terminal-event-pending.unknown.jsonl", func() *models.History {
			return corrupt(newRand(39), corruption{mutate: func(ops []models.Op) []models.Op {
				return unpublish(ops, "OrderApproved", func(d map[string]any) float64 { return d["to_t"].(float64) })
			}}, 2)
		}},
		{"saga-terminates-early-unhealthy.unknown.jsonl", func() *models.History {
			h := corrupt(newRand(40), corruptionNamed("stuck-proved-early"), 2)
			q := findOp(h.Ops, func(o models.Op) bool { return o.F == models.FQuiesce })
			from := int64(decodeMap(q.Value)["from_t"].(float64))
			h.Ops = renumber(insertBefore(h.Ops, models.FQuiesce, lifeOp(models.FComponentExit, "inventory", 1, from+1e9)))
			return h
		}},
		{"saga-terminates-early-too-soon.unknown.jsonl", func() *models.History {
			return corrupt(newRand(41), corruption{mutate: func(ops []models.Op) []models.Op { return stuckEarly(ops, 3e9) }}, 2)
		}},
		{"per-aggregate-order-redelivery.ok.jsonl", func() *models.History { return forced(4, &plan{dupAll: true}) }},
		{"no-double-effect-replays.ok.jsonl", func() *models.History {
			return forced(5, &plan{ambiguousCharge: true, replayShip: true, replayEmail: true})
		}},
		{"no-double-effect-declined-replay.ok.jsonl", func() *models.History { return forced(6, &plan{decline: true, ambiguousCharge: true}) }},
		{"saga-terminates-timeout-created.ok.jsonl", func() *models.History { return forced(7, &plan{client: clientTimeoutMade}) }},
		{"saga-terminates-timeout-never-arrived.ok.jsonl", func() *models.History { return forced(8, &plan{client: clientNeverArrive}) }},
		{"saga-terminates-refused.ok.jsonl", func() *models.History { return forced(9, &plan{client: clientRefused}) }},
		{"client-idempotency-retry-after-timeout.ok.jsonl", func() *models.History { return forced(10, &plan{client: clientTimeoutOK}) }},
		{"client-idempotency-double-submit.ok.jsonl", func() *models.History { return forced(11, &plan{client: clientDouble}) }},
		{"client-idempotency-late-reply.ok.jsonl", func() *models.History { return forced(12, &plan{client: clientLateReply}) }},
		{"compensation-order-tombstone.ok.jsonl", func() *models.History { return forced(13, &plan{stepTimeout: true}) }},
		{"all-or-nothing-declined.ok.jsonl", func() *models.History { return forced(14, &plan{decline: true}) }},
		{"no-lost-event-unpublished.unknown.jsonl", func() *models.History {
			h := forced(15, &plan{noDup: true})
			h.Ops = editValue(h.Ops, func(o models.Op) bool {
				return isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == "OrderApproved"
			}, func(m map[string]any) { m["published"] = false })
			h.Ops = renumber(slices.DeleteFunc(h.Ops, func(o models.Op) bool { return o.Type == models.Event && o.F == "OrderApproved" && o.Order == victim }))
			return h
		}},
		{"no-lost-event-no-kafka-snapshot.unknown.jsonl", func() *models.History {
			h := forced(16, &plan{})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, func(o models.Op) bool { return o.F == models.FKafkaSnapshot }))
			return h
		}},
		{"saga-terminates-no-final-state.unknown.jsonl", func() *models.History {
			h := forced(17, &plan{})
			h.Ops = editValue(h.Ops, func(o models.Op) bool { return o.F == models.FOrdersSnapshot }, func(m map[string]any) {
				m["complete"] = false
				m["error"] = "GET /orders: context deadline exceeded"
			})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, isOp(models.State, models.FOrderState, victim)))
			return h
		}},
		{"saga-terminates-lost-order.bad.jsonl", func() *models.History {
			h := forced(22, &plan{})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, isOp(models.State, models.FOrderState, victim)))
			return h
		}},
		{"no-phantom-event-incomplete-outbox.unknown.jsonl", func() *models.History {
			h := forced(18, &plan{noDup: true})
			h.Ops = editValue(h.Ops, func(o models.Op) bool {
				return o.F == models.FOutboxSnapshot && decodeMap(o.Value)["db"] == "orders"
			}, func(m map[string]any) { m["complete"] = false })
			h.Ops = renumber(slices.DeleteFunc(h.Ops, func(o models.Op) bool {
				return isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == "OrderApproved"
			}))
			return h
		}},
		{"saga-terminates-quiesce-pending.bad.jsonl", func() *models.History {
			h := forced(20, &plan{})
			h.Ops = editValue(h.Ops, func(o models.Op) bool { return o.F == models.FQuiesce }, func(m map[string]any) {
				m["all_terminal"] = false
				m["pending"] = []string{victim}
			})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, isOp(models.State, models.FOrderState, victim)))
			return h
		}},
		{"no-phantom-event-no-outbox-query.unknown.jsonl", func() *models.History {
			h := forced(21, &plan{})
			h.Ops = renumber(slices.DeleteFunc(h.Ops, func(o models.Op) bool {
				return (o.F == models.FOutboxRow || o.F == models.FOutboxSnapshot || o.F == models.FOutboxDrain) && decodeMap(o.Value)["db"] == "delivery"
			}))
			h.Ops = editValue(h.Ops, func(o models.Op) bool { return o.F == models.FObservePlan }, func(m map[string]any) {
				m["snapshots"] = slices.DeleteFunc(m["snapshots"].([]any), func(x any) bool {
					return x == models.SnapOutboxPfx+"delivery" || x == models.SnapDrainPfx+"delivery"
				})
			})
			return h
		}},
		{"conservation-in-flight.unknown.jsonl", func() *models.History {
			h := forced(19, &plan{})
			h.Ops = editValue(h.Ops, func(o models.Op) bool { return o.F == models.FQuiesce }, func(m map[string]any) { m["all_terminal"] = false })
			return h
		}},
	}
	for i, c := range corruptions {
		c := c
		seed := uint64(100 + i)
		fs = append(fs, fixture{c.want[0] + "-" + c.name + ".bad.jsonl", func() *models.History { return corrupt(newRand(seed), c, 3) }})
	}
	return fs
}

// alsoValid names, per fixture, checkers that must be valid on it beside
// what its name says (the rule whose legal-but-tricky case it is), and
// notApplicable those that must say they had nothing to judge.
var (
	alsoValid = map[string][]string{
		"no-phantom-event-retention.unknown.jsonl":         {"per-aggregate-order", "no-lost-event", "outbox-drains", "no-lost-delivery"},
		"no-lost-delivery-not-yet-committed.unknown.jsonl": {"per-aggregate-order", "outbox-drains"},
		"outbox-drains-relay-unhealthy.unknown.jsonl":      {"per-aggregate-order", "no-lost-delivery"},
		"saga-terminates-early-unhealthy.unknown.jsonl":    {"outbox-drains", "no-lost-delivery", "per-aggregate-order"},
	}
	notApplicable = map[string][]string{
		"no-lost-delivery-no-declaration.ok.jsonl": {"no-lost-delivery"},
	}
)

func corruptionNamed(name string) corruption {
	return corruptions[slices.IndexFunc(corruptions, func(c corruption) bool { return c.name == name })]
}

func findOp(ops []models.Op, sel func(models.Op) bool) models.Op {
	return ops[slices.IndexFunc(ops, sel)]
}

// insertBefore inserts ops before the first op with function f, giving
// each the time of that op unless it has one.
func insertBefore(ops []models.Op, f string, add ...models.Op) []models.Op {
	at := slices.IndexFunc(ops, func(o models.Op) bool { return o.F == f })
	for i := range add {
		if add[i].T == 0 {
			add[i].T = ops[at].T
		}
	}
	return slices.Insert(ops, at, add...)
}

func lifeOp(f, inst string, inc int, t int64) models.Op {
	o := mkOp(models.ProcComponentPrefix+inst, models.Info, f, "", models.ComponentEvent{Instance: inst, Incarnation: inc})
	o.T = t
	return o
}

func writeHistoryFile(t *testing.T, path string, h *models.History) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := models.WriteHistory(f, h); err != nil {
		t.Fatal(err)
	}
}

func TestFixtures(t *testing.T) {
	if *update {
		old, _ := filepath.Glob("testdata/*.jsonl")
		for _, f := range old {
			os.Remove(f)
		}
		for _, f := range fixtures() {
			// the closing snapshots count what the edited history holds,
			// as an observer of that system would have written them
			h := f.build()
			h.Ops = renumber(recount(h.Ops))
			writeHistoryFile(t, filepath.Join("testdata", f.file), h)
		}
	}
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/ (%v): run go test -run Fixtures -update", err)
	}
	seen := map[string]bool{}
	ran := 0
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			ran++
			checker, status := parseFixtureName(t, name)
			seen[checker+"."+string(status)] = true
			h, err := models.ReadHistoryFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v := CheckAll(h, models.OrderSaga)
			t.Logf("%s%s", v.Status, describe(v))
			var r models.CheckResult
			for _, x := range v.Results {
				if x.Checker == checker {
					r = x
				}
			}
			switch status {
			case models.Valid:
				if v.Status != models.Valid {
					t.Fatalf("verdict %s, want valid:%s", v.Status, describe(v))
				}
			case models.Invalid:
				if r.Status != models.Invalid {
					t.Fatalf("%s is %s, want invalid:%s", checker, r.Status, describe(v))
				}
				if !slices.ContainsFunc(r.Violations, func(x models.Violation) bool { return x.Order == victim }) {
					t.Fatalf("%s does not name %s:%s", checker, victim, describe(v))
				}
			case models.Unknown:
				if checker == "all" {
					r = v.Results[0]
				}
				if r.Status != models.Unknown || v.Status != models.Unknown {
					t.Fatalf("%s is %s, verdict %s, want both unknown:%s", checker, r.Status, v.Status, describe(v))
				}
				if r.Unknown == "" {
					t.Fatal("unknown without saying what was lacking")
				}
			}
			for _, x := range v.Results {
				if slices.Contains(alsoValid[name], x.Checker) && x.Status != models.Valid {
					t.Errorf("%s is %s (%s), want valid", x.Checker, x.Status, x.Unknown)
				}
				if slices.Contains(notApplicable[name], x.Checker) && (x.Status != models.Valid || x.NotApplicable == "") {
					t.Errorf("%s is %s (not applicable %q), want valid and not applicable", x.Checker, x.Status, x.NotApplicable)
				}
			}
		})
	}
	if ran < len(files) {
		return // filtered with -run: coverage is not the question
	}
	// every checker has at least one bad fixture
	for _, n := range Names() {
		if !seen[n+".invalid"] {
			t.Errorf("no %s-*.bad.jsonl fixture", n)
		}
	}
}

func parseFixtureName(t *testing.T, name string) (string, models.Status) {
	base := strings.TrimSuffix(name, ".jsonl")
	var status models.Status
	switch {
	case strings.HasSuffix(base, ".ok"):
		status = models.Valid
	case strings.HasSuffix(base, ".bad"):
		status = models.Invalid
	case strings.HasSuffix(base, ".unknown"):
		status = models.Unknown
	default:
		t.Fatalf("fixture %s: name must end in .ok/.bad/.unknown.jsonl", name)
	}
	for _, n := range Names() {
		if strings.HasPrefix(base, n+"-") {
			return n, status
		}
	}
	if strings.HasPrefix(base, "all-") {
		return "all", status
	}
	t.Fatalf("fixture %s: name must start with a checker name or all-", name)
	return "", status
}

// Saved runs: every testdata/runs/<dir>/ holds history.jsonl and the
// verdict.json recorded for it; re-checking must keep the status and the
// set of invalid checkers.
func TestSavedRuns(t *testing.T) {
	if *update {
		seedRun(t, "gen-valid", func() *models.History {
			s, p := randomPlans(newRand(40), 12)
			h, _ := genHistory(newRand(41), s, p)
			return h
		}())
		seedRun(t, "gen-double-shipment", corrupt(newRand(42), corruptions[slices.IndexFunc(corruptions, func(c corruption) bool { return c.name == "double-shipment" })], 6))
	}
	dirs, _ := filepath.Glob("testdata/runs/*/history.jsonl")
	if len(dirs) == 0 {
		t.Fatal("no saved runs under testdata/runs/: run go test -run SavedRuns -update")
	}
	for _, hp := range dirs {
		dir := filepath.Dir(hp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			h, err := models.ReadHistoryFile(hp)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "verdict.json"))
			if err != nil {
				t.Fatal(err)
			}
			var want models.Verdict
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("verdict.json: %v", err)
			}
			got := CheckAll(h, models.OrderSaga)
			if got.Status != want.Status {
				t.Fatalf("status %s, recorded %s:%s", got.Status, want.Status, describe(got))
			}
			if g, w := invalidSet(got), invalidSet(want); !slices.Equal(g, w) {
				t.Fatalf("invalid checkers %v, recorded %v:%s", g, w, describe(got))
			}
		})
	}
}

func invalidSet(v models.Verdict) []string {
	var out []string
	for _, r := range v.Results {
		if r.Status == models.Invalid {
			out = append(out, r.Checker)
		}
	}
	slices.Sort(out)
	return out
}

func seedRun(t *testing.T, name string, h *models.History) {
	dir := filepath.Join("testdata", "runs", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeHistoryFile(t, filepath.Join(dir, "history.jsonl"), h)
	b, err := json.MarshalIndent(CheckAll(h, models.OrderSaga), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "verdict.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
