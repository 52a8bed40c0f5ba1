package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"
	"go.yaml.in/yaml/v3"
)

const tinyCalm = "testdata/tiny-calm.json"

func readIndexJSON(t *testing.T, path string) []indexEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var es []indexEntry
	if err := json.Unmarshal(b, &es); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return es
}

func seedLines(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "seed ") {
			out = append(out, l)
		}
	}
	return out
}

// TestSweepKeepsFailing: a --seeds sweep prints one line per run and the
// checker table only for a non-valid run; --keep failing (the default)
// removes a valid run's directory and keeps its summary line; report merges
// the lines and the kept directories of two sweeps in one store into one
// index and one JUnit.
func TestSweepKeepsFailing(t *testing.T) {
	out := t.TempDir()
	r := sagachaos(t, "run", "--scenario", tinyCalm, "--seeds", "1-3", "--out", out)
	if r.code != 0 {
		t.Fatalf("reference sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := seedLines(r.stdout)
	if len(lines) != 3 {
		t.Fatalf("want 3 run lines, got %q\n%s", lines, r.stdout)
	}
	for i, l := range lines {
		if !regexp.MustCompile(fmt.Sprintf(`^seed %d +valid +[0-9.]+s$`, i+1)).MatchString(l) {
			t.Errorf("run line %q: want seed, verdict, duration", l)
		}
	}
	if strings.Contains(r.stdout, "ok   saga-terminates") {
		t.Errorf("a valid run printed its checker table:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, "\x1b[") {
		t.Errorf("escape sequences on a non-terminal:\n%q", r.stdout+r.stderr)
	}
	if !strings.Contains(r.stdout, "sweep seeds 1-3: 3/3 runs, 3 valid, 0 invalid, 0 unknown, 0 error") {
		t.Errorf("no summary line:\n%s", r.stdout)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*-tiny-calm-*"))
	if len(dirs) != 0 {
		t.Errorf("valid run directories kept under --keep failing: %v", dirs)
	}

	r = sagachaos(t, "run", "--mutant", "email-before-pivot", "--scenario", tinyCalm, "--seeds", "4-5", "--out", out)
	if r.code != 1 {
		t.Fatalf("mutant sweep: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines = seedLines(r.stdout)
	if len(lines) != 2 || !strings.Contains(lines[0], "INVALID") || !strings.Contains(lines[0], "pivot/before-pivot") {
		t.Fatalf("run lines %q: want seed, INVALID, duration and the failing checkers", lines)
	}
	if strings.Count(r.stdout, "FAIL pivot") != 2 || strings.Count(r.stdout, "replay the exact scenario.json") != 2 {
		t.Errorf("want the checker table and the replay line of both failing runs:\n%s", r.stdout)
	}
	dirs, _ = filepath.Glob(filepath.Join(out, "*-tiny-calm-*"))
	if len(dirs) != 2 {
		t.Errorf("failing run directories: %v, want 2 kept", dirs)
	}
	for _, d := range dirs {
		assertNothingLeft(t, d)
	}
	ledger, err := readLedger(out)
	if err != nil || len(ledger) != 5 {
		t.Fatalf("summary.jsonl: %d lines (%v), want 5", len(ledger), err)
	}

	// --keep all keeps a valid run too.
	all := t.TempDir()
	if r := sagachaos(t, "run", "--scenario", tinyCalm, "--seeds", "6", "--keep", "all", "--out", all); r.code != 0 {
		t.Fatalf("--keep all: exit %d\n%s", r.code, r.stderr)
	}
	if d, _ := filepath.Glob(filepath.Join(all, "*-tiny-calm-6")); len(d) != 1 {
		t.Errorf("--keep all: run dirs %v", d)
	}

	r = sagachaos(t, "report", out)
	if r.code != 0 {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	es := readIndexJSON(t, filepath.Join(out, indexJSONFile))
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%d %s kept=%v", e.Seed, e.Status, e.Kept))
	}
	want := []string{"4 invalid kept=true", "5 invalid kept=true", "1 valid kept=false", "2 valid kept=false", "3 valid kept=false"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("merged index.json runs %q, want %q", got, want)
	}
	var doc struct {
		Tests  int `xml:"tests,attr"`
		Suites []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 5 {
		t.Errorf("merged junit.xml: %d suites (%v), want one per run", len(doc.Suites), err)
	}
	idx, _ := os.ReadFile(filepath.Join(out, "index.html"))
	if !bytes.Contains(idx, []byte("summarised, not kept")) {
		t.Error("index.html does not mark the summarised runs")
	}
}

// TestSweepProgressOnTTY runs a sweep on a pseudo-terminal: a live progress
// line (bar, runs done/total, failures so far, ETA, the current run) is
// redrawn in place, and the run lines and the summary still come out whole.
// (The per-second redraws with the current run's phase depend on how long a
// run takes, so only the redraws at each run's start and end are asserted.)
func TestSweepProgressOnTTY(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(cliBin, "run", "--mutant", "email-before-pivot", "--scenario", tinyCalm, "--seeds", "1-2", "--out", out)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, ptmx); close(done) }()
	err = cmd.Wait()
	<-done // EIO once the child side closes
	ptmx.Close()
	s := buf.String()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%q", err, s)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\r\x1b\[K\[-{24}\] 0/2 runs  0 failing  ETA …  seed 1: `),
		regexp.MustCompile(`\r\x1b\[K\[#{12}-{12}\] 1/2 runs  \x1b\[31m1 failing\x1b\[0m  ETA [0-9]+:[0-9]{2}  seed 2: `),
		// email-before-pivot is proved by pivot (an approved order e-mailed
		// before its charge) or by all-or-nothing (a declined one e-mailed
		// anyway): which one depends on the seed's cards.
		regexp.MustCompile(`\x1b\[31mseed 1 +INVALID +[0-9.]+s  [^\r\n]*(pivot/before-pivot|all-or-nothing/kept-approve)[^\r\n]*\x1b\[0m\r?\n`),
		regexp.MustCompile(`\nsweep seeds 1-2: 2/2 runs, 0 valid, 2 invalid, 0 unknown, 0 error in [0-9:]+; kept 2 run dirs`),
	} {
		if !want.MatchString(s) {
			t.Errorf("terminal output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("terminal output:\n%q", s)
	}
}

// workflow is the part of examples/ci/github-actions.yml the test reads.
type workflow struct {
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Needs    any    `yaml:"needs"`
		If       string `yaml:"if"`
		Strategy struct {
			FailFast *bool `yaml:"fail-fast"`
			Matrix   struct {
				Shard []int `yaml:"shard"`
			} `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			If   string            `yaml:"if"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func step(t *testing.T, wf workflow, job, name string) (run string, with map[string]string) {
	t.Helper()
	for _, s := range wf.Jobs[job].Steps {
		if s.Name == name || (name != "" && strings.HasPrefix(s.Uses, name)) {
			return s.Run, s.With
		}
	}
	t.Fatalf("workflow job %s has no step %q", job, name)
	return "", nil
}

// shell runs a command line of an example file with bash, the CLI under
// test standing for `./sagachaos` (or `sagachaos` on PATH).
func shell(t *testing.T, dir, line string, env ...string) (string, int) {
	t.Helper()
	line = strings.ReplaceAll(line, "./sagachaos ", "sagachaos ")
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	root, _ := filepath.Abs("../..")
	// The commands run outside the checkout, as in CI's fresh runner dir;
	// the test's binary was built in the checkout (go build), so it is told
	// where its built-in targets are.
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(cliBin)+":"+os.Getenv("PATH"), "SAGACHAOS_MODULE_DIR="+root), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return b.String(), code
}

// TestShardsMergeLikeOneProcess runs the GitHub Actions example's own
// commands: n shard processes in parallel (the `run shard` step, once per
// matrix entry), the artifact layout download-artifact makes, and the
// `merge` step; the shards' seeds are disjoint and cover the range, and the
// merged index equals a single process's run over the same seeds. The
// Kubernetes example is checked the same way (its Job's shape, and its
// shard and merge commands run for every completion index).
func TestShardsMergeLikeOneProcess(t *testing.T) {
	b, err := os.ReadFile("../../examples/ci/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("examples/ci/github-actions.yml does not parse: %v", err)
	}
	shards := wf.Jobs["shard"].Strategy.Matrix.Shard
	if want := fmt.Sprint(len(shards)); wf.Env["SHARDS"] != want {
		t.Errorf("env SHARDS=%s but the matrix has %d shards", wf.Env["SHARDS"], len(shards))
	}
	for i, s := range shards {
		if s != i+1 {
			t.Errorf("matrix.shard %v: want 1..n", shards)
		}
	}
	if ff := wf.Jobs["shard"].Strategy.FailFast; ff == nil || *ff {
		t.Error("shard jobs must not fail fast: one violation would cancel the other shards")
	}
	runShard, _ := step(t, wf, "shard", "run shard")
	_, up := step(t, wf, "shard", "actions/upload-artifact")
	merge, _ := step(t, wf, "merge", "merge")
	_, down := step(t, wf, "merge", "actions/download-artifact")
	if wf.Jobs["merge"].Needs != "shard" || wf.Jobs["merge"].If != "always()" {
		t.Errorf("the merge job must need the shards and run always (a shard with a violation fails): needs=%v if=%q", wf.Jobs["merge"].Needs, wf.Jobs["merge"].If)
	}
	if !strings.Contains(runShard, `--out "runs/shard-${{ matrix.shard }}"`) || up["path"] != "runs/shard-${{ matrix.shard }}" {
		t.Errorf("the upload path %q is not the shard's --out: %s", up["path"], runShard)
	}
	if up["name"] != "run-store-${{ matrix.shard }}" || down["pattern"] != "run-store-*" || !strings.Contains(merge, down["path"]+"/*") {
		t.Errorf("download pattern %q / path %q do not match the upload name %q and the merge command %q", down["pattern"], down["path"], up["name"], merge)
	}

	// Small values, as a test can afford: 6 seeds over 3 shards.
	const seeds, n = "1-6", 3
	tmp := t.TempDir()
	scen, _ := filepath.Abs(tinyCalm)
	vars := []string{"SEEDS=" + seeds, "SHARDS=" + fmt.Sprint(n), "SCENARIO=" + scen}
	var wg sync.WaitGroup
	outs := make([]string, n)
	codes := make([]int, n)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i-1], codes[i-1] = shell(t, tmp, strings.ReplaceAll(runShard, "${{ matrix.shard }}", fmt.Sprint(i)), vars...)
		}()
	}
	wg.Wait()
	covered := map[uint64]int{}
	for i := 1; i <= n; i++ {
		if codes[i-1] != 0 {
			t.Fatalf("shard %d: exit %d\n%s", i, codes[i-1], outs[i-1])
		}
		if !strings.Contains(outs[i-1], fmt.Sprintf("sweep seeds %s shard %d/%d: 2/2 runs", seeds, i, n)) {
			t.Errorf("shard %d: no one-line summary:\n%s", i, outs[i-1])
		}
		store := filepath.Join(tmp, "runs", fmt.Sprintf("shard-%d", i))
		if _, err := os.Stat(filepath.Join(store, "junit.xml")); err != nil {
			t.Errorf("shard %d wrote no merged junit.xml: %v", i, err)
		}
		for _, e := range readIndexJSON(t, filepath.Join(store, indexJSONFile)) {
			covered[e.Seed]++
			if int(e.Seed%n)+1 != i {
				t.Errorf("seed %d ran in shard %d", e.Seed, i)
			}
		}
		// What download-artifact makes of the upload.
		if err := os.MkdirAll(filepath.Join(tmp, down["path"]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(store, filepath.Join(tmp, down["path"], fmt.Sprintf("run-store-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for s := uint64(1); s <= 6; s++ {
		if covered[s] != 1 {
			t.Errorf("seed %d ran %d times over the shards, want once", s, covered[s])
		}
	}
	if len(covered) != 6 {
		t.Errorf("shards ran seeds %v, want exactly 1-6", covered)
	}
	if o, code := shell(t, tmp, merge, vars...); code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, o)
	}
	merged := readIndexJSON(t, filepath.Join(tmp, "merged", indexJSONFile))

	single := filepath.Join(tmp, "single")
	if o, code := shell(t, tmp, `sagachaos run --target reference --scenario "$SCENARIO" --seeds "$SEEDS" --out `+single, vars...); code != 0 {
		t.Fatalf("single process: exit %d\n%s", code, o)
	}
	one := readIndexJSON(t, filepath.Join(single, indexJSONFile))
	if a, b := comparable(merged), comparable(one); !slices.Equal(a, b) {
		t.Errorf("merged index of %d shards:\n%s\nsingle process:\n%s", n, strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if _, err := os.Stat(filepath.Join(tmp, "merged", "junit.xml")); err != nil {
		t.Errorf("merge wrote no junit.xml: %v", err)
	}
	fmt.Printf("%d shards in parallel over seeds %s: disjoint, covering, merged index (%d runs) equal to one process's\n", n, seeds, len(merged))

	checkK8s(t, scen, single)
}

// comparable drops what differs between two runs of the same seed (the run
// directory's timestamp) from index.json entries.
func comparable(es []indexEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s seed=%d %s kept=%v %v", e.Target, e.Mutant, e.Scenario, e.Seed, e.Status, e.Kept, e.Failing))
	}
	slices.Sort(out)
	return out
}

type k8sDoc struct {
	Kind string `yaml:"kind"`
	Spec struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    int    `yaml:"completions"`
		Parallelism    int    `yaml:"parallelism"`
		Template       struct {
			Spec struct {
				Containers []struct {
					Command      []string `yaml:"command"`
					Args         []string `yaml:"args"`
					Env          []struct{ Name, Value string }
					VolumeMounts []struct {
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func k8sJobs(t *testing.T, path string) []k8sDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var out []k8sDoc
	for {
		var d k8sDoc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s does not parse: %v", path, err)
		}
		if d.Kind == "Job" {
			out = append(out, d)
		}
	}
	return out
}

// checkK8s: the Indexed Job's completions, parallelism and SHARDS agree, its
// pods and the merge Job mount the same volume, and its commands, run with
// small values for every completion index, merge into the same index as one
// process (single is that process's store).
func checkK8s(t *testing.T, scen, single string) {
	jobs := k8sJobs(t, "../../examples/k8s/campaign.yaml")
	merges := k8sJobs(t, "../../examples/k8s/merge-job.yaml")
	if len(jobs) != 1 || len(merges) != 1 {
		t.Fatalf("want one Job in campaign.yaml and one in merge-job.yaml, got %d and %d", len(jobs), len(merges))
	}
	j := jobs[0]
	c := j.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if j.Spec.CompletionMode != "Indexed" || j.Spec.Completions != j.Spec.Parallelism || fmt.Sprint(j.Spec.Completions) != env["SHARDS"] {
		t.Errorf("Indexed Job: mode %q, completions %d, parallelism %d, SHARDS %q: want Indexed and all three equal",
			j.Spec.CompletionMode, j.Spec.Completions, j.Spec.Parallelism, env["SHARDS"])
	}
	mc := merges[0].Spec.Template.Spec.Containers[0]
	if len(c.VolumeMounts) != 1 || len(mc.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != mc.VolumeMounts[0].MountPath {
		t.Fatalf("the shards and the merge must mount one volume at one path")
	}
	mount := c.VolumeMounts[0].MountPath
	if !slices.Equal(c.Command, []string{"sh", "-c"}) || len(c.Args) != 1 || len(mc.Args) != 1 {
		t.Fatalf("want sh -c with one command line: %v %v", c.Command, c.Args)
	}
	if testing.Short() {
		return // the quick path checks the files' shape; running them is the full suite's
	}
	tmp := t.TempDir()
	line := strings.ReplaceAll(c.Args[0], mount+"/", tmp+"/")
	const n = 3
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, code := shell(t, tmp, line, "SEEDS=1-6", "SHARDS=3", "SCENARIO="+scen, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)); code != 0 {
				t.Errorf("completion index %d: exit %d\n%s", i, code, o)
			}
		}()
	}
	wg.Wait()
	if o, code := shell(t, tmp, strings.ReplaceAll(mc.Args[0], mount+"/", tmp+"/")); code != 0 {
		t.Fatalf("k8s merge: exit %d\n%s", code, o)
	}
	merged := readIndexJSON(t, filepath.Join(tmp, "merged", indexJSONFile))
	one := readIndexJSON(t, filepath.Join(single, indexJSONFile))
	if a, b := comparable(merged), comparable(one); !slices.Equal(a, b) {
		t.Errorf("k8s: merged index of %d completion indexes:\n%s\nsingle process:\n%s", n, strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
