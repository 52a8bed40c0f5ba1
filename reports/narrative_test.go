package reports_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
)

var update = flag.Bool("update", false, "rewrite testdata/narrative.golden")

// goldenRun is one history whose violations the narrative must tell.
type goldenRun struct {
	name   string
	h      *models.History
	runDir string
}

// goldenRuns: every invalid fixture of the checkers' corpus (one per
// violation kind), their saved real runs, and this package's runs (a real
// relay run without component ops, and the component-op fixture).
func goldenRuns(t *testing.T) []goldenRun {
	t.Helper()
	var out []goldenRun
	files, _ := filepath.Glob("../checkers/testdata/*.bad.jsonl")
	dirs, _ := filepath.Glob("../checkers/testdata/runs/*/history.jsonl")
	own, _ := filepath.Glob("testdata/runs/*/history.jsonl")
	for _, f := range append(append(files, dirs...), own...) {
		h, err := models.ReadHistoryFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name, dir := filepath.Base(f), ""
		if strings.HasSuffix(f, "/history.jsonl") {
			dir = filepath.Dir(f)
			name = filepath.Base(dir)
		}
		out = append(out, goldenRun{name: name, h: h, runDir: dir})
	}
	h, _, logs := reports.RelayCrashRun()
	dir := t.TempDir()
	for n, b := range logs {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return append(out, goldenRun{name: "fixture:relay-crash-component-ops", h: h, runDir: dir})
}

// tokens are the words a clause citing op must contain at least one of:
// what the op is about (its order, its component, its function, the
// database, SKU or consumer it names).
func tokens(op models.Op) []string {
	ts := []string{op.F, strings.TrimPrefix(op.Proc, models.ProcComponentPrefix)}
	// What a snapshot is called in prose.
	switch op.F {
	case models.FKafkaSnapshot:
		ts = append(ts, "Kafka log")
	case models.FOrdersSnapshot:
		ts = append(ts, "order list")
	case models.FOutboxSnapshot:
		ts = append(ts, "outbox")
	case models.FQuiesce:
		ts = append(ts, "quiescence")
	}
	if op.Order != "" {
		ts = append(ts, op.Order)
	}
	var v map[string]any
	if json.Unmarshal(op.Value, &v) == nil {
		for _, k := range []string{"db", "sku", "consumer", "target", "instance", "failpoint"} {
			if s, ok := v[k].(string); ok && s != "" {
				ts = append(ts, s)
			}
		}
		if st, ok := v["stock"].(map[string]any); ok {
			for k := range st {
				ts = append(ts, k)
			}
		}
	}
	return ts
}

// TestNarrativeGolden tells every violation of the golden runs and checks
// that each clause is traceable: it cites ops that exist, each either
// cited by the violation, an op of the violation's order, or a component
// or nemesis op (the events the story adds), and its text names what its
// first op is about. The sentences are pinned in testdata/narrative.golden
// (`go test ./reports -run NarrativeGolden -update` rewrites it).
func TestNarrativeGolden(t *testing.T) {
	var golden bytes.Buffer
	kinds := map[string]int{}
	componentStories := 0
	for _, run := range goldenRuns(t) {
		v := checkers.CheckAll(run.h, models.OrderSaga)
		vs, stories := reports.Narratives(run.h, v, run.runDir)
		fmt.Fprintf(&golden, "== %s\n", run.name)
		perSig := map[string]int{}
		for k, vi := range vs {
			sig := vi.Checker + "/" + vi.Kind
			story := stories[k]
			// Every story is checked; the golden file pins the first three
			// of each signature per run (a run can have hundreds).
			perSig[sig]++
			out := &golden
			if perSig[sig] > 3 {
				out = &bytes.Buffer{}
			}
			fmt.Fprintf(out, "%s %s ops=%v\n", sig, vi.Order, vi.Ops)
			if len(vi.Ops) > 0 && len(story) == 0 {
				t.Errorf("%s: %s of %s has cited ops but no narrative", run.name, sig, vi.Order)
			}
			if len(story) > 0 {
				kinds[sig]++
			}
			cited := map[int64]bool{}
			for _, i := range vi.Ops {
				cited[i] = true
			}
			for _, c := range story {
				fmt.Fprintf(out, "  - %s %v\n", c.Text, c.Ops)
				if len(c.Ops) == 0 {
					t.Errorf("%s: %s: clause %q cites no op", run.name, sig, c.Text)
					continue
				}
				for _, i := range c.Ops {
					if i < 0 || i >= int64(len(run.h.Ops)) {
						t.Errorf("%s: %s: clause %q cites op %d, not in the history", run.name, sig, c.Text, i)
						continue
					}
					op := run.h.Ops[i]
					own := vi.Order != "" && op.Order == vi.Order
					added := strings.HasPrefix(op.Proc, models.ProcComponentPrefix) || op.Proc == models.ProcNemesis
					if !cited[i] && !own && !added {
						t.Errorf("%s: %s: clause %q cites op %d (%s %s), which the violation does not cite and which is neither its order's nor a component event", run.name, sig, c.Text, i, op.Proc, op.F)
					}
					if added {
						componentStories++
					}
				}
				first := run.h.Ops[c.Ops[0]]
				named := false
				for _, tok := range tokens(first) {
					if tok != "" && strings.Contains(c.Text, tok) {
						named = true
					}
				}
				if !named {
					t.Errorf("%s: %s: clause %q does not name what its op #%d is about (%v)", run.name, sig, c.Text, c.Ops[0], tokens(first))
				}
			}
		}
		var sigs []string
		for sig, n := range perSig {
			if n > 3 {
				sigs = append(sigs, sig)
			}
		}
		sort.Strings(sigs)
		for _, sig := range sigs {
			fmt.Fprintf(&golden, "(%s: %d more, checked, not pinned)\n", sig, perSig[sig]-3)
		}
	}
	// One story per violation kind of the corpus.
	var got []string
	for k := range kinds {
		got = append(got, k)
	}
	sort.Strings(got)
	t.Logf("%d violation kinds told: %s", len(got), strings.Join(got, " "))
	if len(got) < 19 {
		t.Errorf("only %d violation kinds told, want every kind of the corpus (19 or more)", len(got))
	}
	if componentStories == 0 {
		t.Error("no story cites a component event")
	}
	path := filepath.Join("testdata", "narrative.golden")
	if *update {
		if err := os.WriteFile(path, golden.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, golden.Bytes()) {
		t.Errorf("narratives differ from %s (rerun with -update if the change is intended):\n%s", path, firstDiff(string(want), golden.String()))
	}
}

// TestNarrativeNamesComponentAndFailpoint: the relay story says which
// relay crashed and at which failpoint, in both kinds of history.
func TestNarrativeNamesComponentAndFailpoint(t *testing.T) {
	for _, run := range goldenRuns(t) {
		var want []string
		switch run.name {
		case "fixture:relay-crash-component-ops":
			want = []string{"relay-2 hit failpoint relay.after-mark (crash, hit 3) and exited by itself (signal: killed)", "relay-2 was restarted"}
		case "relay-publish-crash-mark-before-ack-1-comp":
			want = []string{"relay-2 hit failpoint relay.after-publish (crash, hit 7) and exited by itself (signal: killed)", "relay-2 was restarted"}
		case "relay-publish-crash-mark-before-ack-1-nocomp":
			want = []string{"relay-2 hit failpoint relay.after-publish (crash, hit 6) and exited by itself (signal: killed)", "relay-2 was restarted"}
		default:
			continue
		}
		v := checkers.CheckAll(run.h, models.OrderSaga)
		_, stories := reports.Narratives(run.h, v, run.runDir)
		if len(stories) == 0 {
			t.Fatalf("%s: no violation", run.name)
		}
		var texts []string
		for _, c := range stories[0] {
			texts = append(texts, c.Text)
		}
		line := strings.Join(texts, "; ")
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: story lacks %q:\n%s", run.name, w, line)
			}
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for k := 0; k < max(len(al), len(bl)); k++ {
		var x, y string
		if k < len(al) {
			x = al[k]
		}
		if k < len(bl) {
			y = bl[k]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", k+1, x, y)
		}
	}
	return ""
}
