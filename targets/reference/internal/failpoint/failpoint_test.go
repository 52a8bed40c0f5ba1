package failpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSetupRejects(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"nope=crash", "unknown failpoint"},
		{"relay.after-select", "want name=action"},
		{"relay.after-select=explode", "unknown action"},
		{"relay.after-select=crash@0", "bad hit count"},
		{"relay.after-select=sleep(forever)", "bad sleep duration"},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			defer Reset()
			err := Setup(c.spec, "", "x")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Setup(%q) = %v, want an error containing %q", c.spec, err, c.want)
			}
		})
	}
}

// An armed point fires on its Nth hit only, and the log has one "reached"
// line per point plus one line per firing.
func TestFiresOnNthHitAndLogs(t *testing.T) {
	defer Reset()
	log := filepath.Join(t.TempDir(), "fp.jsonl")
	if err := Setup(" payment.after-charge=error@3 ; relay.after-mark=sleep(1ms) ", log, "payment-1"); err != nil {
		t.Fatal(err)
	}
	var errs []int
	for i := 1; i <= 5; i++ {
		if err := Inject("payment.after-charge"); err != nil {
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("hit %d: %v is not ErrInjected", i, err)
			}
			errs = append(errs, i)
		}
	}
	if len(errs) != 1 || errs[0] != 3 {
		t.Fatalf("error on hits %v, want [3]", errs)
	}
	start := time.Now()
	if err := Inject("relay.after-mark"); err != nil || time.Since(start) < time.Millisecond {
		t.Fatalf("sleep action: err %v after %v", err, time.Since(start))
	}
	Inject("orders.after-create") // reached, not armed
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []logLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	want := []logLine{
		{"payment-1", "payment.after-charge", 1, ""},
		{"payment-1", "payment.after-charge", 3, "error"},
		{"payment-1", "relay.after-mark", 1, ""},
		{"payment-1", "relay.after-mark", 1, "sleep"},
		{"payment-1", "orders.after-create", 1, ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines %+v, want %+v", len(lines), lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, lines[i], want[i])
		}
	}
}

// TestOnePointArmedTwice: two faults on one point stay two, each firing on
// its own hit.
func TestOnePointArmedTwice(t *testing.T) {
	defer Reset()
	if err := Setup("payment.after-charge=error@2;payment.after-charge=error@4", "", "payment"); err != nil {
		t.Fatal(err)
	}
	var errs []int
	for i := 1; i <= 5; i++ {
		if Inject("payment.after-charge") != nil {
			errs = append(errs, i)
		}
	}
	if len(errs) != 2 || errs[0] != 2 || errs[1] != 4 {
		t.Fatalf("error on hits %v, want [2 4]", errs)
	}
}

// Off means off: nothing armed, no log, no counting.
func TestOffCostsNothing(t *testing.T) {
	Reset()
	if err := Inject("relay.after-select"); err != nil {
		t.Fatal(err)
	}
	if points["relay.after-select"].hits.Load() != 0 {
		t.Fatal("a disarmed point counted a hit")
	}
	if n := testing.AllocsPerRun(100, func() { Inject("relay.after-select") }); n != 0 {
		t.Fatalf("Inject allocates %v times when off", n)
	}
}

func BenchmarkInjectOff(b *testing.B) {
	Reset()
	for b.Loop() {
		Inject("relay.after-select")
	}
}

// A marker logs its first reach, then at most one line per markerEvery
// with the hit count so far; it cannot be armed, and Inject refuses it.
func TestMarkerLogsThinnedAndCannotBeArmed(t *testing.T) {
	defer Reset()
	if err := Setup("orders.timeout.charging=crash", "", "orders"); err == nil || !strings.Contains(err.Error(), "marker") {
		t.Fatalf("arming a marker: %v, want an error naming it a marker", err)
	}
	Reset()
	log := filepath.Join(t.TempDir(), "fp.jsonl")
	if err := Setup("", log, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		Reached("orders.timeout.charging")
	}
	time.Sleep(markerEvery + 10*time.Millisecond)
	Reached("orders.timeout.charging")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var hits []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ln logLine
		if err := json.Unmarshal([]byte(l), &ln); err != nil {
			t.Fatal(err)
		}
		if ln.Failpoint != "orders.timeout.charging" || ln.Action != "" || ln.Instance != "orders" {
			t.Fatalf("line %s", l)
		}
		hits = append(hits, int(ln.Hit))
	}
	if len(hits) != 2 || hits[0] != 1 || hits[1] != 51 {
		t.Fatalf("logged hits %v, want [1 51]: the first reach, then one line after the interval", hits)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Inject of a marker did not panic")
		}
	}()
	_ = Inject("orders.timeout.charging")
}
