package checkers

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// Issue 10 item 1: a history cut anywhere — at a line boundary or in the
// middle of a line — is never valid. Of 172 cut points of a real run, 31
// used to be. Every saved run is cut after every op and in the middle of
// every line; an invalid run may stay invalid (what it proves came before
// the cut), a valid one must become unknown and say why.
//
// Reading a cut file gives the ops before the cut (a cut-off last line is
// dropped, with Truncated set); the reader's side of that is checked on
// the bytes of a sample of cuts, and every cut is then checked on the op
// prefix it reads as (the reader is the only way a cut history gets in).
func TestTruncatedHistoriesAreNeverValid(t *testing.T) {
	paths, _ := filepath.Glob("testdata/runs/*/history.jsonl")
	if len(paths) == 0 {
		t.Fatal("no saved runs under testdata/runs")
	}
	for _, p := range paths {
		t.Run(filepath.Base(filepath.Dir(p)), func(t *testing.T) {
			full, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h, err := models.ReadHistory(bytes.NewReader(full))
			if err != nil {
				t.Fatal(err)
			}
			whole := CheckAll(h, models.OrderSaga)
			// byte offsets of the end of each op line (after the header)
			var ends []int
			for i := 0; i < len(full); {
				nl := bytes.IndexByte(full[i:], '\n')
				if nl < 0 {
					break
				}
				i += nl + 1
				ends = append(ends, i)
			}
			ends = ends[1:] // the header line
			if len(ends) != len(h.Ops) {
				t.Fatalf("%d op lines, %d ops", len(ends), len(h.Ops))
			}
			// -short checks every 7th cut; the full run checks every line
			// boundary, and a mid-line cut of every 5th line (it reads as the
			// same ops, truncated).
			stride := 1
			if testing.Short() {
				stride = 7
			}
			for k := 0; k < len(h.Ops); k += stride {
				start := 0
				if k > 0 {
					start = ends[k-1]
				}
				mid := start + (ends[k]-start)/2
				for _, cut := range []struct {
					at        int
					truncated bool
				}{{start, false}, {mid, true}} {
					if cut.truncated && k%5 != 0 {
						continue
					}
					if k%37 == 0 { // the reader gives the prefix of ops before the cut
						got, err := models.ReadHistory(bytes.NewReader(full[:max(cut.at, ends[0]-1)]))
						if err == nil && (len(got.Ops) != k || got.Truncated != cut.truncated) && cut.at >= ends[0] {
							t.Fatalf("cut at byte %d read as %d ops (truncated %v), want %d (%v)", cut.at, len(got.Ops), got.Truncated, k, cut.truncated)
						}
					}
					pre := &models.History{Header: h.Header, Ops: h.Ops[:k], Truncated: cut.truncated}
					v := CheckAll(pre, models.OrderSaga)
					switch {
					case v.Status == models.Valid:
						t.Fatalf("cut at byte %d of %d (%d ops) is valid", cut.at, len(full), k)
					case whole.Status == models.Valid && v.Status != models.Unknown:
						t.Fatalf("cut at byte %d of a valid run is %s:%s", cut.at, v.Status, describe(v))
					case v.Status == models.Unknown && !strings.Contains(describe(v), "history incomplete: no run-end op"):
						t.Fatalf("cut at byte %d is unknown without naming what is missing:%s", cut.at, describe(v))
					}
				}
			}
		})
	}
}

// A snapshot that closes more rows than were recorded before it, or a
// snapshot the observer planned and never closed, makes a history
// incomplete even with its run-end op.
func TestIncompleteSnapshotsAreNamed(t *testing.T) {
	base := func() *models.History {
		s, p := randomPlans(newRand(50), 4)
		h, _ := genHistory(newRand(51), s, p)
		return h
	}
	if v := CheckAll(base(), models.OrderSaga); v.Status != models.Valid {
		t.Fatalf("base history %s:%s", v.Status, describe(v))
	}
	cases := []struct {
		name, want string
		edit       func(h *models.History)
	}{
		{"an applied row missing before its snapshot", "history inconsistent: applied-snapshot (op #", func(h *models.History) {
			at := -1
			for i, o := range h.Ops {
				if o.F == models.FApplied {
					at = i
				}
			}
			h.Ops = renumber(append(h.Ops[:at:at], h.Ops[at+1:]...))
		}},
		{"a planned drain watch never closed", "snapshots never closed: drain:orders", func(h *models.History) {
			var out []models.Op
			for _, o := range h.Ops {
				if !(o.F == models.FOutboxDrain && strings.Contains(string(o.Value), `"db":"orders"`)) {
					out = append(out, o)
				}
			}
			h.Ops = renumber(out)
		}},
		{"no run-end", "no run-end op", func(h *models.History) { h.Ops = h.Ops[:len(h.Ops)-1] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := base()
			c.edit(h)
			v := CheckAll(h, models.OrderSaga)
			if v.Status != models.Unknown || !strings.Contains(describe(v), c.want) {
				t.Fatalf("verdict %s, want unknown naming %q:%s", v.Status, c.want, describe(v))
			}
		})
	}
}

// Health judges "every component was healthy" from both vocabularies.
func TestHealth(t *testing.T) {
	life := func(f, inst string, at int64) models.Op {
		o := mkOp(models.ProcComponentPrefix+inst, models.Info, f, "", models.ComponentEvent{Instance: inst})
		o.T = at
		return o
	}
	nem := func(f, inst string, at int64) models.Op {
		o := mkOp(models.ProcNemesis, models.Info, f, "", models.FaultRecord{ID: "c1", Kind: f, Phase: models.PhaseInstant, Target: inst})
		o.T = at
		return o
	}
	decl := mkOp(models.ProcHarness, models.Info, models.FTarget, "", models.TargetDecl{Instances: []string{"a", "b"}})
	healed := func(unhealthy ...string) models.Op {
		o := mkOp(models.ProcHarness, models.Info, models.FHealed, "", models.Healed{Unhealthy: unhealthy})
		o.T = 5
		return o
	}
	cases := []struct {
		name      string
		ops       []models.Op
		insts     []string
		wantStart int64
		wantWhy   string
	}{
		{"an older history: a crash and its restart move the window", []models.Op{nem("crash", "a", 20), nem("restart", "a", 30)}, nil, 30, ""},
		{"an older history: a crash without a restart", []models.Op{nem("crash", "a", 20)}, nil, 10, "a was not healthy"},
		{"an older history: an instance never named was up", nil, nil, 10, ""},
		{"lifecycle: an exit and a healthy incarnation", []models.Op{decl, life("healthy", "a", 1), life("healthy", "b", 1), life("exit", "b", 40), life("start", "b", 41), life("healthy", "b", 50)}, nil, 50, ""},
		{"lifecycle: an instance still starting", []models.Op{decl, life("healthy", "a", 1), life("exit", "b", 2), life("start", "b", 3)}, nil, 10, "b was not healthy"},
		{"lifecycle: a declared instance without any op", []models.Op{decl, life("healthy", "a", 1)}, nil, 10, "no lifecycle op of b"},
		{"lifecycle: only the relays asked about", []models.Op{decl, life("healthy", "a", 1), life("exit", "b", 20)}, []string{"a"}, 10, ""},
		{"heal left an instance unhealthy", []models.Op{decl, life("healthy", "a", 1), life("healthy", "b", 1), healed("b")}, nil, 10, "b was not healthy at the end of heal"},
		{"heal left it unhealthy, and it came back", []models.Op{decl, life("healthy", "a", 1), life("healthy", "b", 1), healed("b"), life("healthy", "b", 60)}, nil, 60, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start, why, _ := HealthOf(renumber(c.ops)).From(c.insts, 10, 100)
			if start != c.wantStart || (c.wantWhy == "") != (why == "") || !strings.Contains(why, c.wantWhy) {
				t.Fatalf("From = %d, %q; want %d, %q", start, why, c.wantStart, c.wantWhy)
			}
		})
	}
}

// The saved real runs of the planted bugs of issue 12 (and of the early
// stuck proof) are caught by their rule and nothing else.
func TestSavedPlantedBugsCaughtByTheirRuleOnly(t *testing.T) {
	want := map[string]struct{ checker, kind string }{
		"real-skip-failed-message-db-crash-seed4": {"no-lost-delivery", "lost-delivery"},
		"real-relay-id-cursor-calm-seed1":         {"outbox-drains", "stuck-row"},
		"real-coalescing-outbox-calm-seed3":       {"per-aggregate-order", "vanished-row"},
		"real-silent-approval-calm-seed2":         {"saga-terminates", "missing-terminal-event"},
		"real-no-step-timeout-gateway-hang-seed1": {"saga-terminates", "stuck"},
	}
	for dir, w := range want {
		t.Run(dir, func(t *testing.T) {
			h, err := models.ReadHistoryFile(filepath.Join("testdata", "runs", dir, "history.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			v := CheckAll(h, models.OrderSaga)
			if got := invalidSet(v); len(got) != 1 || got[0] != w.checker {
				t.Fatalf("invalid checkers %v, want only %s:%s", got, w.checker, describe(v))
			}
			for _, r := range v.Results {
				for _, x := range r.Violations {
					if x.Kind != w.kind {
						t.Fatalf("%s %s: %s", x.Checker, x.Kind, x.Message)
					}
				}
			}
		})
	}
	// the reference run with the new ops judges every new rule
	h, err := models.ReadHistoryFile(filepath.Join("testdata", "runs", "real-reference-everything-seed1", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	v := CheckAll(h, models.OrderSaga)
	for _, r := range v.Results {
		if r.Status != models.Valid || r.NotApplicable != "" {
			t.Fatalf("%s: %s %q %q", r.Checker, r.Status, r.Unknown, r.NotApplicable)
		}
	}
}
