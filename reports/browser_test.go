package reports

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// chromium finds a headless-capable Chromium. CHROMIUM overrides the search.
// A missing browser is a failed test, not a skip: the browser checks are
// the only proof that the report's script runs and that nothing injected
// executes.
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium not found: install it with `apt-get update && apt-get install -y chromium` (Debian), or set CHROMIUM=/path/to/chrome")
	return ""
}

// runChromium runs one headless Chromium over a file:// URL with extra args
// (--dump-dom or --screenshot=…) and returns stdout and the console lines it
// logged (uncaught exceptions, console.*, CSP violations). The browser gets
// its own process group and is killed as a group if it overruns.
func runChromium(t testing.TB, pageURL string, extra ...string) (stdout string, console []string) {
	t.Helper()
	bin := chromium(t)
	profile, err := os.MkdirTemp("", "sagachaos-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
		"--window-size=1400,1800"}
	args = append(append(args, extra...), pageURL)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, tail(errb.String(), 3000))
	}
	// Reap any helper left in the group (normally none).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return out.String(), console
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func fileURL(path, fragment string) string {
	u := url.URL{Scheme: "file", Path: path}
	if fragment != "" {
		u.Fragment = fragment
	}
	return u.String()
}

// writeRunDir writes report.html (and the given log files) into a fresh
// run directory and returns the report's path.
func writeRunDir(t testing.TB, h *models.History, v models.Verdict, logs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteHTML(f, h, v, HTMLOptions{RunDir: dir}); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// artifactDir is where browser screenshots are kept (ignored by git).
func artifactDir(t testing.TB) string {
	d, err := filepath.Abs(filepath.Join("testdata", "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

var openDetailsRE = regexp.MustCompile(`(?s)<details class="violation" id="violation-1"[^>]*\bopen\b[^>]*>\s*<summary>(.*?)</summary>`)

func TestBrowserFailingReport(t *testing.T) {
	h, v := failingRun()
	report := writeRunDir(t, h, v, map[string]string{"relay-1.log": "relay started\n", "orders.log": "listening\n"})

	// One browser run both dumps the DOM and keeps a screenshot artifact.
	shot := filepath.Join(artifactDir(t), "report.png")
	os.Remove(shot)
	dom, console := runChromium(t, fileURL(report, ""), "--dump-dom", "--screenshot="+shot, "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("browser console is not clean:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-report-ready="1"`) {
		t.Fatalf("report script did not run to the end (no data-report-ready)\n%s", tail(dom, 2000))
	}
	m := openDetailsRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("first violation is not open on load")
	}
	for _, want := range []string{`<span class="order mono">o-17</span>`, `<span class="checker mono">no-double-effect</span>`, "double-refund"} {
		if !strings.Contains(m[1], want) {
			t.Errorf("open violation summary lacks %s: %s", want, m[1])
		}
	}
	if !strings.Contains(dom, `<svg class="swim"`) || !strings.Contains(dom, `aria-label="timeline of order o-17"`) {
		t.Error("per-order timeline SVG was not drawn for the open violation")
	}
	if got := strings.Count(dom, `class="hlm"`); got != 2 {
		t.Errorf("timeline highlights %d ops, want the 2 cited refunds", got)
	}
	if !strings.Contains(dom, `class="fault"`) || !strings.Contains(dom, "nemesis → relay-1→kafka") {
		t.Error("timeline lacks the shaded link-down window or its nemesis lane")
	}
	if !strings.Contains(dom, `<details class="orow bad" id="order-o-17"`) {
		t.Error("order index does not list o-17 as a failing order")
	}
	if !strings.Contains(dom, `<a href="./relay-1.log">relay-1.log</a>`) {
		t.Error("no link to relay-1.log")
	}

	// Opening the order by its fragment draws its timeline and op table.
	shot2 := filepath.Join(artifactDir(t), "report-order.png")
	dom, console = runChromium(t, fileURL(report, "order-o-17"), "--dump-dom", "--screenshot="+shot2, "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("console not clean with #order-o-17:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `aria-label="timeline of order o-17"`) || strings.Count(dom, `<tr class="t-effect hl"`) != 2 {
		t.Error("#order-o-17 did not open the order with its two highlighted refunds")
	}

	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("no usable screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)

	t.Logf("screenshot: %s", shot2)
}

// TestBrowserNothingExecutes puts script and event-handler payloads into an
// order id, event payloads, client error text (a log line), a violation
// message and a log file name, opens the report and the hostile order in
// Chromium, and checks that none of them ran: every payload would change
// document.title or mark <html>.
func TestBrowserNothingExecutes(t *testing.T) {
	const mark = `document.title='pwned';document.documentElement.setAttribute('data-pwned','1')`
	payloads := []string{
		`<script>` + mark + `</script>`,
		`"><img src=x onerror="` + mark + `">`,
		`'><svg onload="` + mark + `">`,
		`</script><script>` + mark + `</script>`,
	}
	evil := strings.Join(payloads, " ")
	order := `o-"><img src=x onerror="` + mark + `">`
	b := newHist()
	b.saga("client-1", "o-1", 100, 0, "")
	_, refunds := b.saga("client-2", order, 900, 2, evil)
	fail := b.add("client-3", models.Info, models.FPlaceOrder, order, models.ClientFailure{Error: "log line: " + evil + " dsn=postgres://app:hunter2@db/x"})
	b.add(models.ProcNemesis, models.Info, "kill", "", models.FaultRecord{ID: evil, Kind: "kill", Phase: models.PhaseInstant, Target: evil})
	// A component whose name, failpoint and exit status are hostile: its
	// lane, marks, labels, the narrative and the component list show them
	// as text.
	inst := `relay-"><svg onload="` + mark + `">`
	b.add(models.ProcComponentPrefix+inst, models.Info, models.FComponentStart, "", models.ComponentEvent{Instance: inst, Incarnation: 1, Cause: evil})
	b.add(models.ProcComponentPrefix+inst, models.Info, models.FFailpoint, "", models.FailpointEvent{Instance: inst, Failpoint: evil, Hit: 1, Action: "crash", Fired: true})
	b.add(models.ProcComponentPrefix+inst, models.Info, models.FComponentExit, "", models.ComponentEvent{Instance: inst, Incarnation: 1, Status: evil})
	v := models.Verdict{Status: models.Invalid, Ops: len(b.h.Ops),
		Run: models.RunInfo{Target: "reference", Scenario: "xss", Seed: 1, Repro: "sagachaos run --scenario xss " + payloads[1]},
		Results: []models.CheckResult{{Checker: "no-double-effect", Status: models.Invalid, Violations: []models.Violation{
			{Checker: "no-double-effect", Kind: "double-refund" + payloads[0], Order: order, Message: "refunded twice " + evil, Ops: append(refunds, fail)},
		}}}}
	logName := `x"><img src=x onerror="` + strings.ReplaceAll(mark, "/", "") + `">.log`
	report := writeRunDir(t, b.h, v, map[string]string{logName: evil})

	for _, frag := range []string{"", "order-" + order} {
		dom, console := runChromium(t, fileURL(report, frag), "--dump-dom")
		if len(console) > 0 {
			t.Errorf("fragment %q: console not clean:\n%s", frag, strings.Join(console, "\n"))
		}
		if !strings.Contains(dom, `data-report-ready="1"`) {
			t.Fatalf("fragment %q: report script did not finish", frag)
		}
		if strings.Contains(dom, "<title>pwned") || pwnedRE.MatchString(dom) {
			t.Fatalf("fragment %q: an injected payload executed", frag)
		}
		if strings.Contains(dom, "hunter2") {
			t.Errorf("fragment %q: DSN password reached the page", frag)
		}
		// The payloads are shown as text, not dropped.
		if !strings.Contains(dom, `&lt;script&gt;document.title='pwned'`) {
			t.Errorf("fragment %q: payload text is not visible as text", frag)
		}
		if frag != "" && !strings.Contains(dom, `<tr class="t-info hl"`) {
			t.Errorf("hostile order was not opened from its fragment")
		}
	}
}

// pwnedRE finds the attribute a payload sets on <html> when it runs (the
// payload text itself also contains "data-pwned", but escaped, as text).
var pwnedRE = regexp.MustCompile(`<html[^>]*\bdata-pwned=`)

func TestBrowserLargeRun(t *testing.T) {
	// The quick path opens a smaller large run; BenchmarkWriteHTML100k
	// measures the 100k-op render's time and size either way.
	ops := 100_000
	if testing.Short() {
		ops = 20_000
	}
	h, v := largeRun(ops)
	report := writeRunDir(t, h, v, nil)
	shot := filepath.Join(artifactDir(t), "report-large.png")
	dom, console := runChromium(t, fileURL(report, ""), "--dump-dom", "--screenshot="+shot, "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("console not clean on a %d-op report:\n%s", ops, strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-report-ready="1"`) || !strings.Contains(dom, `<svg class="swim"`) {
		t.Fatalf("%d-op report did not render its first violation's timeline", ops)
	}
	if !strings.Contains(dom, "page 1 of") {
		t.Error("order index is not paged")
	}
	t.Logf("screenshot: %s", shot)
}

// TestBrowserEdgeReports opens reports with nothing to draw — a valid run,
// and a run that failed before it had a history — and checks the script
// still finishes without console errors.
func TestBrowserEdgeReports(t *testing.T) {
	b := newHist()
	b.saga("client-1", "o-1", 100, 0, "")
	valid := models.Verdict{Status: models.Valid, Ops: len(b.h.Ops), Run: models.RunInfo{Target: "reference", Scenario: "calm"},
		Results: []models.CheckResult{{Checker: "pivot", Status: models.Valid}}}
	tests := []struct {
		name string
		h    *models.History
		v    models.Verdict
		want string
	}{
		{"valid", b.h, valid, `id="verdict">VALID</span>`},
		{"error without history", nil, models.Verdict{Error: "env up: initdb: exit status 1"}, "run error: env up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := writeRunDir(t, tt.h, tt.v, nil)
			dom, console := runChromium(t, fileURL(report, ""), "--dump-dom")
			if len(console) > 0 {
				t.Errorf("console not clean:\n%s", strings.Join(console, "\n"))
			}
			if !strings.Contains(dom, `data-report-ready="1"`) || !strings.Contains(dom, tt.want) {
				t.Errorf("script did not finish or page lacks %q", tt.want)
			}
		})
	}
}
