package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

func renderHTML(t testing.TB, h *models.History, v models.Verdict, opts HTMLOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, h, v, opts); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return buf.String()
}

var dataRE = regexp.MustCompile(`(?s)<script type="application/json" id="sc-data">(.*?)</script>`)

func TestWriteHTMLContent(t *testing.T) {
	h, v := failingRun()
	dir := t.TempDir()
	for _, name := range []string{"relay-1.log", "orders.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	page := renderHTML(t, h, v, HTMLOptions{RunDir: dir})
	for _, want := range []string{
		`<span class="badge b-invalid" id="verdict">INVALID</span>`,
		`<code id="repro">sagachaos run --target reference --mutant non-idempotent-compensation --scenario redelivery --seed 42</code>`,
		`no-double-effect`, `double-refund`, `order o-17 was refunded 2 times`,
		`<a href="./relay-1.log">relay-1.log</a>`, `<a href="./orders.log">orders.log</a>`,
		`lacking: no outbox snapshot in the history`,
		`<svg id="overall-svg"`, `class="fault"`, // the link-down window on the whole-run chart
		`data-order="o-17"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "notes.txt") {
		t.Error("report links a non-log file")
	}
	if strings.Contains(page, "http://") && !strings.Contains(page, `xmlns`) {
		// No network: the only URLs allowed are SVG namespaces inside the script.
		for _, m := range regexp.MustCompile(`(?:src|href)="https?://`).FindAllString(page, -1) {
			t.Errorf("report loads from the network: %s", m)
		}
	}
	m := dataRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no embedded data script")
	}
	if strings.ContainsAny(m[1], "<>") {
		t.Error("embedded JSON contains < or >, which could close its script element")
	}
	// Evidence ops are rendered inline: the two refunds.
	if got := strings.Count(page, `<tr class="t-effect" id="v1-op-`); got != 2 {
		t.Errorf("evidence table has %d effect rows, want the 2 refunds", got)
	}
}

func TestWriteHTMLEscapesAndRedacts(t *testing.T) {
	b := newHist()
	evil := `"><img src=x onerror=alert(1)><script>alert(2)</script>`
	order := `o-<script>alert(3)</script>`
	b.saga("client-1", order, 100, 1, evil+" postgres://app:hunter2@db/orders")
	v := models.Verdict{Status: models.Invalid, Run: models.RunInfo{Target: "reference", Scenario: "x", Repro: "sagachaos run --dsn postgres://u:topsecret@h/db"},
		Results: []models.CheckResult{{Checker: "pivot", Status: models.Invalid, Violations: []models.Violation{{Checker: "pivot", Kind: "refund-after-pivot", Order: order, Message: "refunded: " + evil, Ops: []int64{4}}}}}}
	page := renderHTML(t, b.h, v, HTMLOptions{})
	for _, bad := range []string{"<script>alert", "<img src=x", "hunter2", "topsecret"} {
		if strings.Contains(page, bad) {
			t.Errorf("report contains %q unescaped or unredacted", bad)
		}
	}
	if !strings.Contains(page, "postgres://u:***@h/db") {
		t.Error("repro DSN not redacted as postgres://u:***@")
	}
}

func TestWriteHTMLNilHistoryAndErrorVerdict(t *testing.T) {
	page := renderHTML(t, nil, models.Verdict{Error: "start target: exec: \"orders\": not found"}, HTMLOptions{RunDir: filepath.Join(t.TempDir(), "missing")})
	for _, want := range []string{"ERROR", "run error: start target", "cannot list logs"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestMaxOpsPerOrderSaysWhatWasLeftOut(t *testing.T) {
	h, v := failingRun()
	page := renderHTML(t, h, v, HTMLOptions{MaxOpsPerOrder: 3})
	if !strings.Contains(page, "had more ops than the per-order cap") {
		t.Error("capped report does not say so")
	}
}

func TestFaultWindows(t *testing.T) {
	h, _ := failingRun()
	fw := faultWindows(h)
	if len(fw) != 2 {
		t.Fatalf("got %d fault windows, want 2: %+v", len(fw), fw)
	}
	if fw[0].Kind != "link-down" || fw[0].Instant || fw[0].Open || fw[0].End <= fw[0].Start || len(fw[0].Ops) != 2 {
		t.Errorf("link-down window wrong: %+v", fw[0])
	}
	if fw[1].Kind != "kill" || !fw[1].Instant {
		t.Errorf("kill not an instant: %+v", fw[1])
	}
	b := newHist()
	b.fault("pause", "p", models.PhaseStart, "orders")
	b.add("client-1", models.Invoke, models.FPlaceOrder, "", nil)
	if fw := faultWindows(b.h); len(fw) != 1 || !fw[0].Open || fw[0].End != b.h.Ops[1].T {
		t.Errorf("unhealed fault should stay open until the last op: %+v", fw)
	}
}

// junit mirrors the common JUnit XML schema shape (the Jenkins/Ant XSD) for
// parsing back.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Time     string `xml:"time,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestWriteJUnit(t *testing.T) {
	_, failing := failingRun()
	tests := []struct {
		name                             string
		v                                models.Verdict
		cases, failures, errors, skipped int
	}{
		{"failing run", failing, 3, 1, 0, 1},
		{"valid run", models.Verdict{Status: models.Valid, Run: models.RunInfo{Target: "t", Scenario: "s"}, Results: []models.CheckResult{{Checker: "a", Status: models.Valid}, {Checker: "b", Status: models.Valid}}}, 2, 0, 0, 0},
		{"run error", models.Verdict{Error: "env up: initdb failed", Run: models.RunInfo{Target: "t", Scenario: "s"}}, 1, 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJUnit(&buf, tt.v); err != nil {
				t.Fatal(err)
			}
			var doc junitDoc
			if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("junit does not parse: %v\n%s", err, buf.String())
			}
			if len(doc.Suites) != 1 {
				t.Fatalf("%d testsuites, want one per run", len(doc.Suites))
			}
			s := doc.Suites[0]
			var f, e, sk int
			for _, c := range s.Cases {
				if c.Name == "" || c.Classname == "" || c.Time == "" {
					t.Errorf("testcase lacks name/classname/time: %+v", c)
				}
				if c.Failure != nil {
					f++
					if !strings.Contains(c.Failure.Body, failing.Run.Repro) || c.Failure.Message == "" || c.Failure.Type == "" {
						t.Errorf("failure lacks message, type or repro: %+v", c.Failure)
					}
				}
				if c.Error != nil {
					e++
				}
				if c.Skipped != nil {
					sk++
					if !strings.HasPrefix(c.Skipped.Message, "unknown") {
						t.Errorf("skipped message %q should say unknown", c.Skipped.Message)
					}
				}
			}
			if len(s.Cases) != tt.cases || f != tt.failures || e != tt.errors || sk != tt.skipped {
				t.Errorf("cases/failures/errors/skipped = %d/%d/%d/%d, want %d/%d/%d/%d", len(s.Cases), f, e, sk, tt.cases, tt.failures, tt.errors, tt.skipped)
			}
			if s.Tests != len(s.Cases) || s.Failures != f || s.Errors != e || s.Skipped != sk {
				t.Errorf("suite counts %d/%d/%d/%d disagree with its testcases", s.Tests, s.Failures, s.Errors, s.Skipped)
			}
			if doc.Tests != s.Tests || doc.Failures != s.Failures || doc.Errors != s.Errors || doc.Skipped != s.Skipped {
				t.Error("testsuites counts disagree with the suite")
			}
		})
	}
}

func TestWriteJSONStableAndRoundTrips(t *testing.T) {
	_, v := failingRun()
	var a, b bytes.Buffer
	if err := WriteJSON(&a, v); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatal("WriteJSON is not deterministic")
	}
	golden := filepath.Join("testdata", "verdict.golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, a.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (UPDATE_GOLDEN=1 go test ./reports to create): %v", err)
	}
	if a.String() != string(want) {
		t.Errorf("verdict.json changed shape; if intended, bump models.VerdictVersion and UPDATE_GOLDEN=1\n%s", a.String())
	}
	path := filepath.Join(t.TempDir(), "verdict.json")
	os.WriteFile(path, a.Bytes(), 0o644)
	got, err := ReadVerdict(path)
	if err != nil {
		t.Fatal(err)
	}
	var c bytes.Buffer
	WriteJSON(&c, got)
	if c.String() != a.String() {
		t.Error("ReadVerdict∘WriteJSON is not the identity")
	}
}

func TestReadVerdictRejects(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]string{
		"future version": `{"version": 99, "status": "valid"}`,
		"bad status":     `{"version": 1, "status": "maybe"}`,
		"not json":       `{`,
	}
	for name, body := range tests {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadVerdict(p); err == nil {
			t.Errorf("%s: ReadVerdict accepted %s", name, body)
		}
	}
	if _, err := ReadVerdict(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("ReadVerdict accepted a missing file")
	}
}

func TestWriteTerminal(t *testing.T) {
	_, v := failingRun()
	var plain, color bytes.Buffer
	if err := WriteTerminal(&plain, v, "runs/x/report.html", false); err != nil {
		t.Fatal(err)
	}
	WriteTerminal(&color, v, "runs/x/report.html", true)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("colour written when not asked")
	}
	if !strings.Contains(color.String(), "\x1b[31m") {
		t.Error("no colour when asked")
	}
	out := plain.String()
	for _, want := range []string{"sagachaos: INVALID", "FAIL no-double-effect", "order o-17 double-refund", "ok   pivot", "??   no-lost-event", "report: runs/x/report.html", "repro:  " + v.Run.Repro} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 6 {
		t.Errorf("summary has %d lines, want 6 (verdict, 3 checkers, report, repro):\n%s", n, out)
	}
}

func TestWriteIndexGroupsBySignature(t *testing.T) {
	_, bad := failingRun()
	var runs []RunSummary
	for seed := uint64(1); seed <= 100; seed++ {
		v := bad
		v.Run.Seed = seed
		runs = append(runs, RunSummary{Dir: "runs/redelivery-" + strconv.FormatUint(seed, 10), Verdict: v})
	}
	runs = append(runs, RunSummary{Dir: "runs/ok", Verdict: models.Verdict{Status: models.Valid, Run: models.RunInfo{Target: "reference", Scenario: "calm", Seed: 7}}})
	var buf bytes.Buffer
	if err := WriteIndex(&buf, runs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if got := strings.Count(page, `<tr class="s-invalid"><td class="mono">`); got != 1 {
		t.Errorf("%d signature rows, want 1 (100 seeds, one bug)", got)
	}
	if !strings.Contains(page, `no-double-effect / <b>double-refund</b></td><td class="num">100</td>`) {
		t.Error("signature row does not count 100 runs")
	}
	if !strings.Contains(page, `href="runs/ok/report.html"`) || !strings.Contains(page, "101</b> runs") {
		t.Error("index lacks the valid run or the total")
	}
}

func TestOrderDataIncludesItsInvoke(t *testing.T) {
	h, v := failingRun()
	js, _, err := buildData(h, v, HTMLOptions{}, faultWindows(h), buildComponents(h, ""))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Types  []string `json:"types"`
		Orders []struct {
			ID  string  `json:"id"`
			Ops [][]any `json:"ops"`
		} `json:"orders"`
	}
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	for _, o := range d.Orders {
		if o.ID != "o-17" {
			continue
		}
		first := o.Ops[0]
		if typ := d.Types[int(first[3].(float64))]; typ != "invoke" {
			t.Errorf("o-17's first op is %s, want the place-order invoke that has no order id", typ)
		}
		return
	}
	t.Fatal("no o-17 in the embedded data")
}

func TestHeaderSaysHowManyFailingOrdersItLeftOut(t *testing.T) {
	h, v := largeRun(30_000) // 2 double refunds per 2000 orders → a few
	for k := range 40 {
		v.Results[0].Violations = append(v.Results[0].Violations, models.Violation{Checker: "no-double-effect", Kind: "double-charge", Order: "o-" + strconv.Itoa(k), Message: "x", Ops: []int64{}})
	}
	page := renderHTML(t, h, v, HTMLOptions{})
	want := len(v.Results[0].Violations) - maxCulprits
	if !strings.Contains(page, "… and "+strconv.Itoa(want)+" more failing orders") {
		t.Errorf("header does not say that %d failing orders were left out of it", want)
	}
}

func TestWriteJSONDoesNotChangeTheVerdict(t *testing.T) {
	v := models.Verdict{Status: models.Invalid, Results: []models.CheckResult{{Checker: "a", Status: models.Invalid,
		Violations: []models.Violation{{Checker: "a", Kind: "k", Message: "m"}}}}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, v); err != nil {
		t.Fatal(err)
	}
	if v.Results[0].Violations[0].Ops != nil || v.Version != 0 {
		t.Error("WriteJSON changed the caller's verdict")
	}
	if !strings.Contains(buf.String(), `"ops": []`) {
		t.Errorf("nil ops not written as []:\n%s", buf.String())
	}
}

func TestWriteTerminalNeutralisesControlCharacters(t *testing.T) {
	v := models.Verdict{Status: models.Invalid, Run: models.RunInfo{Target: "t\x1b]0;owned\x07", Scenario: "s"},
		Results: []models.CheckResult{{Checker: "a", Status: models.Invalid, Violations: []models.Violation{{Kind: "k", Order: "o-\x1b[2J", Message: "m\x1b[31m"}}}}}
	var buf bytes.Buffer
	if err := WriteTerminal(&buf, v, "", false); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(buf.String(), 0x1b) || strings.ContainsRune(buf.String(), 0x07) {
		t.Errorf("terminal output carries raw control characters: %q", buf.String())
	}
	if !strings.Contains(buf.String(), `o-\x1b[2J`) {
		t.Errorf("control characters should stay visible as escapes: %q", buf.String())
	}
}

func TestWriteIndexEscapes(t *testing.T) {
	evil := `"><script>alert(1)</script>`
	runs := []RunSummary{{Dir: "runs/" + evil, Verdict: models.Verdict{Status: models.Invalid, Run: models.RunInfo{Target: evil, Scenario: evil, Repro: "x --dsn postgres://u:pw@h/db"},
		Results: []models.CheckResult{{Checker: evil, Status: models.Invalid, Violations: []models.Violation{{Checker: evil, Kind: evil, Order: evil, Message: evil}}}}}}}
	var buf bytes.Buffer
	if err := WriteIndex(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<script>alert") {
		t.Error("index does not escape run data")
	}
}

// A checker with nothing to judge (the saga checkers of an outbox-only
// target, no-lost-delivery without a consumer) reads n/a with its reason,
// in the terminal and in the HTML table alike; a rule a checker did not
// apply is named after its counters.
func TestNotApplicableReadsNA(t *testing.T) {
	h, v := failingRun()
	v.Results = append(v.Results,
		models.CheckResult{Checker: "no-lost-delivery", Status: models.Valid, NotApplicable: "the target declares no consumer"},
		models.CheckResult{Checker: "per-aggregate-order", Status: models.Valid, Stats: map[string]int64{"seq-gaps": 0},
			RulesNotApplicable: map[string]string{"vanished-row": "the records carry no seq"}})
	var term bytes.Buffer
	if err := WriteTerminal(&term, v, "", false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n/a  no-lost-delivery", "not applicable the target declares no consumer", "seq-gaps=0 vanished-row n/a"} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal lacks %q:\n%s", want, term.String())
		}
	}
	page := renderHTML(t, h, v, HTMLOptions{})
	for _, want := range []string{
		`<tr class="s-na"><td class="mono">no-lost-delivery</td><td><span class="badge b-na">n/a</span></td>`,
		`not applicable: the target declares no consumer`,
		`seq-gaps=0 vanished-row n/a (the records carry no seq)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
