package checkers

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
	"pgregory.net/rapid"
)

// Rapid fail files go under testdata/rapid/ (rapid's default, relative to
// this package): a failing seed is then replayed on every later run until
// fixed, which is what a regression corpus should do. They are committed
// only when they pin a bug on purpose.

// describe renders a verdict's violations and unknowns for a failure message.
func describe(v models.Verdict) string {
	var sb strings.Builder
	for _, r := range v.Results {
		if r.Status == models.Valid {
			continue
		}
		fmt.Fprintf(&sb, "\n  %s: %s %s", r.Checker, r.Status, r.Unknown)
		for _, x := range r.Violations {
			fmt.Fprintf(&sb, "\n    %s order=%s %s ops=%v", x.Kind, x.Order, x.Message, x.Ops)
		}
	}
	return sb.String()
}

// Every correct history, whatever its legal nondeterminism, is valid for
// every checker: zero false positives.
func TestPropertyCorrectHistoriesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ch := rapidChooser{t}
		n := rapid.IntRange(0, 8).Draw(t, "orders")
		stock, plans := randomPlans(ch, n)
		h, _ := genHistory(ch, stock, plans)
		v := CheckAll(h, models.OrderSaga)
		if vac := NewIndex(h, models.OrderSaga).Vacuous(); vac != "" {
			// every order refused or never arrived: nothing to judge
			for _, r := range v.Results {
				if r.Status != models.Unknown || r.Unknown != vac {
					t.Fatalf("vacuous history: %s is %s (%s), want unknown: %s", r.Checker, r.Status, r.Unknown, vac)
				}
			}
			return
		}
		if v.Status != models.Valid {
			t.Fatalf("correct history judged %s:%s", v.Status, describe(v))
		}
		// each checker alone agrees with the shared-index run
		for i, c := range All(models.OrderSaga) {
			if r := c.Check(h); r.Status != v.Results[i].Status {
				t.Fatalf("%s alone: %s, in CheckAll: %s", c.Name(), r.Status, v.Results[i].Status)
			}
		}
	})
}

// Each corruption makes exactly its intended checkers invalid, and every
// violation points at the corrupted order (or at no order, for aggregate
// stock), never at an innocent one.
func TestPropertyCorruptionsAreCaught(t *testing.T) {
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				n := rapid.IntRange(0, 5).Draw(t, "orders")
				h := corrupt(rapidChooser{t}, c, n)
				assertCaught(t, c, CheckAll(h, models.OrderSaga))
			})
		})
	}
}

func assertCaught(t interface{ Fatalf(string, ...any) }, c corruption, v models.Verdict) {
	var invalid []string
	pointed := false
	for _, r := range v.Results {
		if r.Status == models.Invalid {
			invalid = append(invalid, r.Checker)
		}
		for _, x := range r.Violations {
			if x.Order != victim && x.Order != "" {
				t.Fatalf("%s: %s flagged innocent order %s: %s%s", c.name, x.Checker, x.Order, x.Message, describe(v))
			}
			if x.Checker == c.want[0] && x.Order == victim {
				pointed = true
			}
		}
	}
	want := slices.Clone(c.want)
	slices.Sort(want)
	slices.Sort(invalid)
	if !slices.Equal(invalid, want) {
		t.Fatalf("%s: invalid checkers %v, want %v%s", c.name, invalid, want, describe(v))
	}
	if !pointed {
		t.Fatalf("%s: %s did not name %s%s", c.name, c.want[0], victim, describe(v))
	}
}

var update = flag.Bool("update", false, "regenerate checkers/testdata fixtures and seed runs")

// TestMain keeps rapid's default check count unless the caller set one.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

var _ = filepath.Join

// The model must actually produce the legal nondeterminism the property
// claims to cover; otherwise "zero false positives" would be cheap.
func TestGeneratorCoversLegalNondeterminism(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(0); seed < 200; seed++ {
		ch := newRand(seed)
		stock, plans := randomPlans(ch, 6)
		h, _ := genHistory(ch, stock, plans)
		ix := NewIndex(h, models.OrderSaga)
		for _, p := range plans {
			seen["client:"+p.client]++
			if p.stepTimeout {
				seen["step-timeout"]++
			}
		}
		for _, o := range ix.Orders {
			if o.FinalOp >= 0 {
				seen["final:"+o.Final.Status]++
			}
		}
		for _, e := range ix.Effects {
			if e.Replay {
				seen["replay:"+e.F]++
			}
			if e.F == models.FCharge && e.Status == models.ChargeDeclined {
				seen["declined"]++
			}
		}
		ids := map[string]int{}
		for _, e := range ix.Events {
			ids[e.EventID]++
			if e.Type == "StockRejected" {
				seen["out-of-stock"]++
			}
		}
		for _, n := range ids {
			if n > 1 {
				seen["duplicate-publish"]++
			}
		}
		healed := false
		for _, op := range h.Ops {
			if op.Proc == models.ProcNemesis {
				seen["nemesis"]++
			}
			if op.F == models.FHealed {
				healed = true
			}
			if healed && op.F == models.FComponentExit {
				seen["component-exit-after-heal"]++
			}
		}
		handles := map[string]bool{}
		for _, c := range ix.Target.Consumers {
			for _, t := range c.Types {
				handles[t] = true
			}
		}
		for _, e := range ix.Events {
			if !handles[e.Type] {
				seen["record-nobody-handles"]++
			}
		}
	}
	want := []string{"final:APPROVED", "final:CANCELLED", "declined", "out-of-stock", "step-timeout", "duplicate-publish",
		"replay:charge", "replay:shipment", "replay:email", "nemesis",
		"component-exit-after-heal", "record-nobody-handles"}
	for _, m := range clientModes {
		want = append(want, "client:"+m)
	}
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("200 generated histories never showed %s (saw %v)", w, seen)
		}
	}
}
