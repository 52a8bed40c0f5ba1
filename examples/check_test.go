package examples

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/scenarios"
)

// smallCalm is a few orders, half of them declined, and no faults: the
// planted email-before-pivot bug (the confirmation e-mail goes out before the
// charge) fails every case — pivot sees the e-mail before the charge of any
// order, all-or-nothing the e-mail of a declined one — so the smallest
// failing case is one order.
const smallCalm = `{
  "name": "small-calm",
  "description": "A few orders and no faults, for the go-test shrink demonstration.",
  "orders": {"min": 1, "max": 12}, "clients": {"min": 1, "max": 2}, "skus": {"min": 1, "max": 2},
  "stock": {"min": 50, "max": 50}, "qty": {"min": 1, "max": 2}, "lines": {"min": 1, "max": 2},
  "decline_rate": 0.5, "gap_ms": {"min": 0, "max": 10}, "relays": {"min": 1, "max": 1},
  "faults": {"count": {"min": 0, "max": 0}, "kinds": [], "duration_ms": {"min": 0, "max": 0}},
  "limits": {"time_limit": "30s", "quiesce": "20s", "client_timeout": "5s"}
}`

const (
	helperEnv  = "SAGACHAOS_CHECK_HELPER" // fail-file root: run TestCheckHelper for real
	outEnv     = "SAGACHAOS_CHECK_OUT"
	shrinkEnv  = "SAGACHAOS_CHECK_SHRINK"
	helperTest = "TestCheckHelper"
)

// TestCheckHelper is the go test a user would write, with a planted bug. It
// does something only when TestPlantedBugShrinksAndReplays runs it in a
// child process (it is meant to fail).
func TestCheckHelper(t *testing.T) {
	root := os.Getenv(helperEnv)
	if root == "" {
		return
	}
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.ParseSpec("small-calm.json", []byte(smallCalm))
	if err != nil {
		t.Fatal(err)
	}
	shrink, err := time.ParseDuration(os.Getenv(shrinkEnv))
	if err != nil {
		t.Fatal(err)
	}
	harness.Check(t, m, spec, harness.Mutant("email-before-pivot"), harness.Runs(1),
		harness.ShrinkTime(shrink), harness.FailFiles(root), harness.OutDir(os.Getenv(outEnv)))
}

var (
	caseSizes = regexp.MustCompile(`first failing case: (\d+) sagas \((\d+) declined\), (\d+) faults \[[^\]]*\]; smallest failing case: ((\d+) sagas \((\d+) declined\), (\d+) faults \[[^\]]*\])`)
	realRuns  = regexp.MustCompile(`sagachaos: (\d+) cases \(search, shrink and replays\), (\d+) real runs`)
)

// TestPlantedBugShrinksAndReplays shows that a bug found through `go test`
// is shrunk and replayed by rapid (issue 10 item 12): harness.Check, in a
// child `go test` with the email-before-pivot mutant, fails on a
// multi-order case, rapid shrinks it to a smaller one and writes a fail file
// outside the repository; the next run fails from that fail file first,
// before any new search, on the shrunk case.
func TestPlantedBugShrinksAndReplays(t *testing.T) {
	ctx := context.Background()
	m, err := target.Find("reference")
	if err != nil {
		t.Fatal(err)
	}
	_, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.ParseSpec("small-calm.json", []byte(smallCalm))
	if err != nil {
		t.Fatal(err)
	}
	// A rapid seed whose first case has several orders: the child then
	// finds the bug on a case worth shrinking.
	seed, orders := firstCaseSeed(t, scenarios.ScenarioGen(spec, target.Catalog(m, fps)))
	t.Logf("rapid seed %d: the first case has %d orders", seed, orders)

	root, out := t.TempDir(), t.TempDir()
	shrink := "90s"
	if testing.Short() {
		shrink = "40s"
	}
	child := func(args ...string) (string, int) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^" + helperTest + "$", "-test.v", "-test.timeout=15m"}, args...)...)
		cmd.Env = append(os.Environ(), helperEnv+"="+root, outEnv+"="+out, shrinkEnv+"="+shrink)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return b.String(), code
	}

	// 1. Found and shrunk.
	first, code := child("-rapid.seed=" + strconv.FormatUint(seed, 10))
	if code == 0 || !strings.Contains(first, "[rapid] failed after 0 tests: sagachaos: verdict invalid") {
		t.Fatalf("the planted bug was not reported as a rapid failure (exit %d):\n%s", code, first)
	}
	if strings.Contains(first, "flaky test") {
		t.Fatalf("rapid calls the failure flaky: its reproduction step did not fail\n%s", first)
	}
	sz := caseSizes.FindStringSubmatch(first)
	if sz == nil {
		t.Fatalf("no case sizes in the output:\n%s", first)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	firstOrders, minOrders := atoi(sz[1]), atoi(sz[5])
	if firstOrders != orders {
		t.Errorf("the first failing case has %d orders, the seed's first case %d", firstOrders, orders)
	}
	if minOrders >= firstOrders {
		t.Errorf("shrunk %d orders to %d: want fewer\n%s", firstOrders, minOrders, first)
	}
	files, _ := filepath.Glob(filepath.Join(root, "testdata", "rapid", helperTest, "*.fail"))
	if len(files) != 1 {
		t.Fatalf("want one fail file under %s, got %v", root, files)
	}
	if _, err := os.Stat(filepath.Join("testdata", "rapid")); err == nil {
		t.Errorf("a fail file was written into the repository (examples/testdata/rapid)")
	}
	runs := realRuns.FindStringSubmatch(first)
	t.Logf("found and shrunk: %d orders → %s, %s real runs (shrink budget %s)", firstOrders, sz[4], runs[2], shrink)

	// 2. Replayed from the fail file, before any search: rapid names only
	// the fail file (a failure it found by searching also names a seed),
	// and the case it runs is the shrunk one. Another seed makes a search
	// draw other cases.
	second, code := child("-rapid.seed=" + strconv.FormatUint(seed+1000, 10))
	if code == 0 {
		t.Fatalf("the replay passed:\n%s", second)
	}
	if !strings.Contains(second, "[rapid] failed after 0 tests: sagachaos: verdict invalid") ||
		!strings.Contains(second, "-rapid.failfile=") || strings.Contains(second, "(or -rapid.seed=") {
		t.Fatalf("the failure did not come from the fail file:\n%s", second)
	}
	if again := caseSizes.FindStringSubmatch(second); again == nil || again[4] != sz[4] ||
		!strings.HasPrefix(again[0], "first failing case: "+sz[4]+";") {
		t.Errorf("the replay's first failing case is not the shrunk one %q:\n%s", sz[4], second)
	}
	if runs := realRuns.FindStringSubmatch(second); runs != nil {
		t.Logf("replayed from %s: %s real runs", filepath.Base(files[0]), runs[2])
	}
	if again, _ := filepath.Glob(filepath.Join(root, "testdata", "rapid", helperTest, "*.fail")); len(again) != 1 {
		t.Errorf("the replay changed the fail files: %v", again)
	}
}

// firstCaseSeed finds a rapid seed whose first drawn case has 4 or more
// orders, by drawing cases only (no run).
func firstCaseSeed(t *testing.T, gen *rapid.Generator[scenarios.Scenario]) (uint64, int) {
	t.Helper()
	old := map[string]string{}
	for _, name := range []string{"rapid.seed", "rapid.checks", "rapid.nofailfile"} {
		old[name] = flag.Lookup(name).Value.String()
	}
	defer func() {
		for k, v := range old {
			flag.Set(k, v)
		}
	}()
	checks := 1
	if testing.Short() {
		checks = 5 // rapid runs checks/5 under -short
	}
	flag.Set("rapid.checks", strconv.Itoa(checks))
	flag.Set("rapid.nofailfile", "true")
	for seed := uint64(1); seed <= 200; seed++ {
		flag.Set("rapid.seed", strconv.FormatUint(seed, 10))
		var sc *scenarios.Scenario
		t.Run(fmt.Sprintf("draw-seed-%d", seed), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				if sc == nil {
					c := gen.Draw(rt, "scenario")
					sc = &c
				}
			})
		})
		if n := len(sc.Workload.Sagas); n >= 4 {
			return seed, n
		}
	}
	t.Fatal("no rapid seed in 1-200 draws a first case of 4+ orders")
	return 0, 0
}
