package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

func writeLogs(t *testing.T, logs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func started(t *testing.T, h *models.History) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, h.Header.Started)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// markOf finds the mark standing on op i with the given kind.
func markOf(t *testing.T, c *components, inst, kind string) compMark {
	t.Helper()
	for _, m := range c.Marks {
		if m.Inst == inst && m.Kind == kind {
			return m
		}
	}
	t.Fatalf("no %s mark on %s in %+v", kind, inst, c.Marks)
	return compMark{}
}

func TestComponentsFromOps(t *testing.T) {
	h, _, logs := relayCrashRun()
	dir := writeLogs(t, logs)
	c := buildComponents(h, dir)
	c.attachLogs(dir, started(t, h))
	if !c.FromOps {
		t.Error("lanes not read from the component ops")
	}
	if got := strings.Join(c.Lanes, ","); got != "orders,relay-1,relay-2" {
		t.Errorf("lanes %s, want the declared instances in order", got)
	}
	crash := markOf(t, c, "relay-2", cmCrash)
	if crash.Label != "crash at relay.after-mark" || crash.Inc != 1 || crash.Status != "signal: killed" {
		t.Errorf("relay-2's exit: %+v, want an unexpected exit of incarnation 1 labelled with the failpoint that caused it", crash)
	}
	if fired := markOf(t, c, "relay-2", cmFired); fired.Label != "" || fired.Failpoint != "relay.after-mark" || fired.Hit != 3 {
		t.Errorf("fired mark %+v: want relay.after-mark hit 3, its label given to the exit", fired)
	}
	if k := markOf(t, c, "relay-1", cmExit); k.Label != "killed" || k.Cause != "fault:f4" {
		t.Errorf("relay-1's expected exit: %+v", k)
	}
	var down, paused int
	for _, s := range c.Spans {
		switch {
		case s.Inst == "relay-2" && s.Kind == csDown:
			down++
			if s.S != crash.T || s.E != 650*int64(time.Millisecond) {
				t.Errorf("relay-2 down %d–%d, want from its exit to its restart", s.S, s.E)
			}
		case s.Inst == "relay-1" && s.Kind == csPaused:
			paused++
		}
	}
	if down != 1 || paused != 1 {
		t.Errorf("%d down spans of relay-2 and %d pauses of relay-1, want 1 and 1", down, paused)
	}
	// The nemesis's crash/restart ops of an instance that has component ops
	// are not drawn twice.
	for _, m := range c.Marks {
		if op := h.Ops[m.Op]; op.Proc == models.ProcNemesis {
			t.Errorf("mark %+v stands on a nemesis op although relay-2 has component ops", m)
		}
	}
	// Each mark points at the right log line.
	for _, tt := range []struct {
		inst, kind string
		want       string
	}{
		{"relay-2", cmFired, "failpoint relay.after-mark: crash at hit 3"},
		{"relay-2", cmCrash, "failpoint relay.after-mark: crash at hit 3"},
		{"relay-1", cmExit, `"msg":"relay poll"`},
	} {
		m := markOf(t, c, tt.inst, tt.kind)
		if m.Log < 0 {
			t.Errorf("%s %s has no log excerpt", tt.inst, tt.kind)
			continue
		}
		e := c.Logs[m.Log]
		if line := e.Lines[e.Line-e.From]; !strings.Contains(line, tt.want) || e.File != tt.inst+".log" {
			t.Errorf("%s %s → %s:%d %q (%s), want the line with %q", tt.inst, tt.kind, e.File, e.Line, line, e.Why, tt.want)
		}
	}
	var restart compMark
	for _, m := range c.Marks {
		if m.Inst == "relay-2" && m.Kind == cmStart && m.Inc == 2 {
			restart = m
		}
	}
	if e := c.Logs[restart.Log]; !strings.HasPrefix(e.Lines[e.Line-e.From], "=== sagachaos: start #2 at ") || e.Line != 6 {
		t.Errorf("relay-2's restart → %s:%d, want its second start marker (line 6)", e.File, e.Line)
	}
}

// TestComponentsOlderHistory: a history without component ops draws what
// the nemesis's crash and restart ops say, and places a fired crash line
// of failpoints.jsonl (which has no times) at the crash it caused; every
// other line is listed in order only.
func TestComponentsOlderHistory(t *testing.T) {
	b := newHist()
	b.add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{Target: "reference"})
	b.fault("failpoint", "f1", models.PhaseInstant, "relay.after-publish")
	crash := b.add(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: "crash1", Kind: "crash", Phase: models.PhaseInstant, Target: "relay-2",
		Detail: map[string]string{"exit": "signal: killed", "armed_failpoints": "relay.after-publish"}})
	restart := b.add(models.ProcNemesis, models.Info, "restart", "", models.FaultRecord{ID: "crash1", Kind: "restart", Phase: models.PhaseInstant, Target: "relay-2"})
	dir := writeLogs(t, map[string]string{
		"failpoints.jsonl": `{"instance":"relay-2","failpoint":"relay.after-select","hit":1}
{"instance":"relay-2","failpoint":"relay.after-publish","hit":6,"action":"crash"}
{"instance":"orders","failpoint":"orders.after-create","hit":1}
not json
`,
		"relay-2.log": "=== sagachaos: start #1 at 2026-11-30T02:00:00Z: reftarget relay ===\nstarted\nfailpoint relay.after-publish: crash at hit 6\n=== sagachaos: start #1 at 2026-11-30T02:00:01Z: reftarget relay ===\nstarted again\n",
	})
	c := buildComponents(b.h, dir)
	c.attachLogs(dir, started(t, b.h))
	if c.FromOps {
		t.Error("FromOps on a history without component ops")
	}
	cm := markOf(t, c, "relay-2", cmCrash)
	if cm.Op != crash || cm.Label != "crash at relay.after-publish" {
		t.Errorf("crash mark %+v, want on op %d labelled with its failpoint", cm, crash)
	}
	fm := markOf(t, c, "relay-2", cmFired)
	if fm.Op != crash || !fm.Borrowed || fm.T != cm.T || fm.Hit != 6 {
		t.Errorf("fired mark %+v: want drawn at the crash op %d, its time borrowed", fm, crash)
	}
	if rm := markOf(t, c, "relay-2", cmStart); rm.Op != restart || rm.Inc != 2 {
		t.Errorf("restart mark %+v, want op %d, incarnation 2", rm, restart)
	}
	if got := strings.Join(c.OrderOnly["relay-2"], "|"); got != "relay.after-select @1 (reached)" {
		t.Errorf("relay-2 order-only lines %q", got)
	}
	if len(c.OrderOnly["orders"]) != 1 {
		t.Errorf("orders' time-less line not kept: %v", c.OrderOnly)
	}
	if e := c.Logs[cm.Log]; e.Line != 3 {
		t.Errorf("crash → line %d (%s), want line 3, the one naming the failpoint", e.Line, e.Why)
	}
	if e := c.Logs[markOf(t, c, "relay-2", cmStart).Log]; e.Line != 4 {
		t.Errorf("restart → line %d, want the second marker (4)", e.Line)
	}
	// Only lanes with something on the time axis are charted.
	if got := strings.Join(drawnLanes(c), ","); got != "relay-2" {
		t.Errorf("charted lanes %q, want relay-2 only", got)
	}
}

// TestComponentsCrashWithoutFailpointLine: two crash ops but one fired
// crash line cannot be paired one to one; nothing is guessed.
func TestComponentsCrashWithoutFailpointLine(t *testing.T) {
	b := newHist()
	for range 2 {
		b.add(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: "c", Kind: "crash", Phase: models.PhaseInstant, Target: "relay-1"})
	}
	dir := writeLogs(t, map[string]string{"failpoints.jsonl": `{"instance":"relay-1","failpoint":"relay.after-mark","hit":2,"action":"crash"}` + "\n"})
	c := buildComponents(b.h, dir)
	for _, m := range c.Marks {
		if m.Kind == cmFired {
			t.Errorf("paired a fired line with one of two crashes: %+v", m)
		}
	}
	if len(c.OrderOnly["relay-1"]) != 1 {
		t.Errorf("unpaired fired line not listed in order: %v", c.OrderOnly)
	}
}

func TestLogIndexLongLinesAndTimes(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	log := "=== sagachaos: start #1 at 2026-11-30T02:00:00.5Z: a ===\n" +
		`{"time":"2026-11-30T02:00:00.6Z","msg":"one"}` + "\n" + long + "\n" +
		"time=2026-11-30T02:00:00.9Z msg=three\n" + "2026-11-30T02:00:01Z four\n"
	ix, err := indexLog(strings.NewReader(log), time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	want := []int64{500 * ms, 600 * ms, 600 * ms, 900 * ms, 1000 * ms}
	if len(ix.t) != len(want) {
		t.Fatalf("%d lines indexed, want %d", len(ix.t), len(want))
	}
	for k, w := range want {
		if ix.t[k] != w {
			t.Errorf("line %d time %d, want %d", k+1, ix.t[k], w)
		}
	}
	lines, from := ix.excerpt(strings.NewReader(log), 2)
	if from != 1 || len(lines) != 5 || len(lines[2]) > maxLogLineShow+4 || !strings.HasSuffix(lines[2], "…") {
		t.Errorf("excerpt from %d: %d lines, long line %d bytes", from, len(lines), len(lines[2]))
	}
}

func TestLayoutRowsNeverOverlap(t *testing.T) {
	var reqs []labelReq
	for k := range 40 {
		reqs = append(reqs, labelReq{X: float64(100 + k*7), Text: "link-down relay-2→kafka"})
	}
	reqs = append(reqs, labelReq{X: 980, Text: "at the right edge"}, labelReq{X: 500, Text: "limited label text", Limit: 540})
	pos := layoutRows(reqs, 3, 9, 4, 100, 1000)
	type box struct{ x0, x1 float64 }
	rows := map[int][]box{}
	drawn := 0
	for k, p := range pos {
		if p.Row < 0 {
			continue
		}
		drawn++
		b := box{p.X, p.X + textWidth(p.Text, 9)}
		if b.x1 > 1000+0.01 || b.x0 < 100 {
			t.Errorf("label %d %q at %.1f–%.1f leaves the chart", k, p.Text, b.x0, b.x1)
		}
		if q := reqs[k]; q.Limit > 0 && b.x1 > q.Limit {
			t.Errorf("label %q passes its limit", p.Text)
		}
		for _, o := range rows[p.Row] {
			if b.x0 < o.x1+4 && o.x0 < b.x1+4 {
				t.Errorf("labels overlap in row %d: %.1f–%.1f and %.1f–%.1f", p.Row, b.x0, b.x1, o.x0, o.x1)
			}
		}
		rows[p.Row] = append(rows[p.Row], b)
	}
	if drawn < 6 || drawn == len(reqs) {
		t.Errorf("%d of %d labels drawn: want some in each of 3 rows and the rest left out", drawn, len(reqs))
	}
	if p := pos[len(pos)-1]; p.Row < 0 || !strings.HasSuffix(p.Text, "…") {
		t.Errorf("limited label %+v: want it shortened with an ellipsis", p)
	}
}
