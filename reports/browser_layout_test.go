package reports

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// pageProbe is appended to a copy of a report: it opens every violation
// and the first orders, waits for them to draw, then measures in the page
// every text label of every chart (per-order timelines, the whole-run
// chart, the index's strips) with getBoundingClientRect and writes what it
// found into <pre id="sc-probe"> for --dump-dom.
const pageProbe = `<script>
(function () {
  document.querySelectorAll("details.violation").forEach(function (d) { d.open = true; });
  document.querySelectorAll("details.orow").forEach(function (d, k) { if (k < 6) d.open = true; });
  setTimeout(function () {
    var out = { svgs: [], overlaps: [], story: [], lanes: [] };
    document.querySelectorAll("svg.swim:not(.measure), svg.overall, svg.strip").forEach(function (svg, n) {
      var boxes = [];
      svg.querySelectorAll("text").forEach(function (t) {
        if (t.getAttribute("display") === "none") return;
        var r = t.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) return;
        boxes.push({ t: t.textContent, l: r.left, r: r.right, top: r.top, b: r.bottom });
      });
      for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
        var a = boxes[i], c = boxes[j];
        if (a.l < c.r && c.l < a.r && a.top < c.b && c.top < a.b) out.overlaps.push([n, a.t, c.t, [a.l, a.top, a.r, a.b].map(Math.round), [c.l, c.top, c.r, c.b].map(Math.round)]);
      }
      out.svgs.push({ n: n, cls: svg.getAttribute("class"), label: svg.getAttribute("aria-label") || "", texts: boxes.length, hidden: Number(svg.getAttribute("data-labels-hidden") || 0),
        fired: svg.querySelectorAll("path.cm-fired").length, crash: svg.querySelectorAll("path.cm-crash").length,
        clabels: Array.prototype.map.call(svg.querySelectorAll("text.clabel"), function (t) { return t.textContent; }),
        lanes: Array.prototype.map.call(svg.querySelectorAll("text.lname"), function (t) { return t.textContent; }) });
    });
    document.querySelectorAll("p.story").forEach(function (p) { out.story.push(p.textContent); });
    var pre = document.createElement("pre");
    pre.id = "sc-probe";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 300);
})();
</script>`

type probeSVG struct {
	N       int      `json:"n"`
	Class   string   `json:"cls"`
	Label   string   `json:"label"`
	Texts   int      `json:"texts"`
	Hidden  int      `json:"hidden"`
	Fired   int      `json:"fired"`
	Crash   int      `json:"crash"`
	CLabels []string `json:"clabels"`
	Lanes   []string `json:"lanes"`
}

type probeResult struct {
	SVGs     []probeSVG `json:"svgs"`
	Overlaps [][]any    `json:"overlaps"`
	Story    []string   `json:"story"`
}

var probeRE = regexp.MustCompile(`(?s)<pre id="sc-probe">(.*?)</pre>`)

// probePage opens a copy of page with pageProbe in Chromium, keeps a
// screenshot at shot and returns what the probe measured.
func probePage(t *testing.T, page, shot string) probeResult {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	k := bytes.LastIndex(b, []byte("</body>"))
	if k < 0 {
		t.Fatalf("%s has no </body>", page)
	}
	// The index has no script of its own, so its CSP allows none: the
	// probed copy (only) lets the probe run.
	b = bytes.Replace(b, []byte(`style-src 'unsafe-inline'">`), []byte(`style-src 'unsafe-inline'; script-src 'unsafe-inline'">`), 1)
	k = bytes.LastIndex(b, []byte("</body>"))
	probed := filepath.Join(filepath.Dir(page), ".probe-"+filepath.Base(page))
	if os.Getenv("KEEP_PROBE") != "" {
		probed = strings.TrimSuffix(shot, ".png") + ".probe.html"
	}
	if err := os.WriteFile(probed, append(append(append([]byte(nil), b[:k]...), pageProbe...), b[k:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("KEEP_PROBE") == "" {
		defer os.Remove(probed)
	} else {
		t.Logf("probed page: %s", probed)
	}
	os.Remove(shot)
	dom, console := runChromium(t, fileURL(probed, ""), "--dump-dom", "--screenshot="+shot, "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("browser console is not clean on %s:\n%s", filepath.Base(page), strings.Join(console, "\n"))
	}
	m := probeRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe did not report (script error?)\n%s", tail(dom, 2000))
	}
	var res probeResult
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &res); err != nil {
		t.Fatalf("probe output: %v\n%s", err, m[1])
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Errorf("no usable screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
	return res
}

// checkNoOverlap fails for any two labels whose boxes intersect.
func checkNoOverlap(t *testing.T, res probeResult) {
	t.Helper()
	texts, hidden := 0, 0
	for _, s := range res.SVGs {
		texts += s.Texts
		hidden += s.Hidden
	}
	if texts == 0 {
		t.Fatal("the probe measured no labels")
	}
	for _, o := range res.Overlaps {
		t.Errorf("labels intersect in chart %v: %q %v and %q %v", o[0], o[1], o[3], o[2], o[4])
	}
	t.Logf("%d charts, %d labels measured, none intersect; %d left out by the last-pass check", len(res.SVGs), texts, hidden)
}

// TestBrowserRelayRunLanes opens real mark-before-ack relay runs
// (relay-publish-crash seed 1) and the component-op fixture: the relay's
// lane in the first violation's timeline shows the failpoint firing and
// the crash, no two labels of any chart on the page intersect, and the
// narrative names the relay and the failpoint.
func TestBrowserRelayRunLanes(t *testing.T) {
	type tcase struct {
		name, dir       string
		inst, failpoint string
		logs            map[string]string
	}
	cases := []tcase{{name: "real-nocomp", dir: "testdata/runs/relay-publish-crash-mark-before-ack-1-nocomp", inst: "relay-2", failpoint: "relay.after-publish"}}
	if comp, err := filepath.Glob("testdata/runs/*-comp/history.jsonl"); err == nil {
		for _, h := range comp {
			cases = append(cases, tcase{name: "real-" + filepath.Base(filepath.Dir(h)), dir: filepath.Dir(h), inst: "", failpoint: ""})
		}
	}
	cases = append(cases, tcase{name: "fixture-component-ops", inst: "relay-2", failpoint: "relay.after-mark"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.dir != "" {
				copyDir(t, tc.dir, dir)
				h, err := models.ReadHistoryFile(filepath.Join(dir, HistoryFile))
				if err != nil {
					t.Fatal(err)
				}
				v, err := ReadVerdict(filepath.Join(dir, VerdictFile))
				if err != nil {
					t.Fatal(err)
				}
				writeReport(t, dir, h, v)
			} else {
				h, v, logs := relayCrashRun()
				for n, b := range logs {
					if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				writeReport(t, dir, h, v)
			}
			res := probePage(t, filepath.Join(dir, ReportFile), filepath.Join(artifactDir(t), "relay-"+tc.name+".png"))
			checkNoOverlap(t, res)
			inst, fp := tc.inst, tc.failpoint
			if inst == "" { // a saved run with component ops: whichever relay crashed
				inst, fp = crashedRelay(t, tc.dir)
			}
			// The first per-order timeline: the relay's lane, its failpoint
			// and its crash.
			var first *probeSVG
			for k := range res.SVGs {
				if res.SVGs[k].Class == "swim" {
					first = &res.SVGs[k]
					break
				}
			}
			if first == nil {
				t.Fatal("no per-order timeline drawn")
			}
			if !contains(first.Lanes, inst) {
				t.Errorf("first timeline's lanes %v lack %s", first.Lanes, inst)
			}
			if first.Fired < 1 || first.Crash < 1 {
				t.Errorf("first timeline shows %d fired failpoints and %d crashes, want the relay's failpoint firing and its crash", first.Fired, first.Crash)
			}
			if !contains(first.CLabels, "crash at "+fp) {
				t.Errorf("first timeline's component labels %v lack %q", first.CLabels, "crash at "+fp)
			}
			if first.Hidden > 0 {
				t.Errorf("the layout left %d labels to the last-pass check on the first timeline", first.Hidden)
			}
			if len(res.Story) == 0 {
				t.Fatal("no narrative line on the page")
			}
			if s := res.Story[0]; !strings.Contains(s, inst+" hit failpoint "+fp) || !strings.Contains(s, inst+" was restarted") {
				t.Errorf("narrative does not name %s and %s:\n%s", inst, fp, s)
			}
		})
	}
}

func writeReport(t *testing.T, dir string, h *models.History, v models.Verdict) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteHTML(f, h, v, HTMLOptions{RunDir: dir}); err != nil {
		t.Fatal(err)
	}
}

// crashedRelay reads which instance crashed at which failpoint in a saved
// run with component ops.
func crashedRelay(t *testing.T, dir string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"f":"failpoint"`) || !strings.Contains(line, `"component/`) {
			continue
		}
		var op struct {
			Value struct {
				Instance, Failpoint, Action string
				Fired                       bool
			} `json:"value"`
		}
		if json.Unmarshal([]byte(line), &op) == nil && op.Value.Action == "crash" {
			return op.Value.Instance, op.Value.Failpoint
		}
	}
	t.Fatalf("%s: no fired crash failpoint in the history", dir)
	return "", ""
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserEverythingLabels: the fault labels of an `everything`-like run
// (windows starting a few ms apart: link-down relay-2→kafka, crash relay-1,
// restart relay-1 and more) and a busy observer lane lay out without
// overlaps in every chart.
func TestBrowserEverythingLabels(t *testing.T) {
	b := newHist()
	b.add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{Target: "reference", Scenario: "everything", Seed: 1})
	var viols []models.Violation
	for k := range 12 {
		order := "o-" + string(rune('a'+k))
		if k%3 == 0 {
			b.fault("link-down", "L"+order, models.PhaseStart, "relay-2→kafka")
			b.add(models.ProcNemesis, models.Info, "crash", "", models.FaultRecord{ID: "c" + order, Kind: "crash", Phase: models.PhaseInstant, Target: "relay-1"})
			b.add(models.ProcNemesis, models.Info, "restart", "", models.FaultRecord{ID: "c" + order, Kind: "restart", Phase: models.PhaseInstant, Target: "relay-1"})
			b.fault("latency", "T"+order, models.PhaseStart, "payment→gateway")
			b.fault("pause", "P"+order, models.PhaseStart, "inventory")
		}
		_, refunds := b.saga("client-"+string(rune('1'+k%4)), order, 100, 2, "")
		for r := range 6 {
			b.add(models.ProcObserver, models.State, models.FOutboxRow, order, models.OutboxRow{DB: "orders", ID: int64(k*10 + r), Seq: int64(r), Type: "OrderCreated", Published: true})
		}
		if k%3 == 0 {
			b.fault("link-down", "L"+order, models.PhaseEnd, "relay-2→kafka")
			b.fault("latency", "T"+order, models.PhaseEnd, "payment→gateway")
			b.fault("pause", "P"+order, models.PhaseEnd, "inventory")
		}
		viols = append(viols, models.Violation{Checker: "no-double-effect", Kind: "double-refund", Order: order, Message: "refunded twice", Ops: refunds})
	}
	v := models.Verdict{Status: models.Invalid, Ops: len(b.h.Ops), Run: models.RunInfo{Target: "reference", Scenario: "everything", Seed: 1},
		Results: []models.CheckResult{{Checker: "no-double-effect", Status: models.Invalid, Violations: viols}}}
	report := writeRunDir(t, b.h, v, nil)
	res := probePage(t, report, filepath.Join(artifactDir(t), "everything-labels.png"))
	checkNoOverlap(t, res)
	swims := 0
	for _, s := range res.SVGs {
		if s.Class == "swim" {
			swims++
		}
	}
	if swims < 12 {
		t.Errorf("%d per-order timelines measured, want every violation's (12) and more", swims)
	}
}

// TestBrowserIndexSweep opens the merged index of a 1,000-run sweep: no
// console errors, no overlapping labels on its strips, a screenshot kept.
func TestBrowserIndexSweep(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, IndexFile)
	var buf bytes.Buffer
	if err := WriteIndex(&buf, sweep(1000)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := probePage(t, page, filepath.Join(artifactDir(t), "index-1000.png"))
	checkNoOverlap(t, res)
}
