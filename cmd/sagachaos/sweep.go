package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
)

// The run store of a sweep (the --out directory) holds, besides the run
// directories it kept:
//
//   - summary.jsonl: one line per run of every sweep that wrote there — its
//     directory name, whether it was kept, its duration, its shard and its
//     whole verdict. With --keep failing (the default for --seeds) a valid
//     run's directory is removed and this line is all that is left of it;
//     `sagachaos report` reads it back into the index.
//   - index.html, junit.xml, index.json: the merged index, JUnit and a
//     machine-readable list of the last sweep's runs (report rewrites them
//     over everything in the store).
const (
	ledgerFile     = "summary.jsonl"
	indexJSONFile  = "index.json"
	keepFailing    = "failing"
	keepAll        = "all"
	progressBarLen = 24
)

// ledgerLine is one line of summary.jsonl.
type ledgerLine struct {
	Dir        string         `json:"dir"`
	Kept       bool           `json:"kept"`
	DurationMS int64          `json:"duration_ms"`
	Shard      string         `json:"shard,omitempty"`
	Verdict    models.Verdict `json:"verdict"`
}

// appendLedger adds one line with a single write: shards sharing a store
// (a volume) append whole lines.
func appendLedger(out string, l ledgerLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("summary line: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(out, ledgerFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("summary file: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("summary file: %w", err)
	}
	return f.Close()
}

// readLedger reads a store's summary.jsonl; a missing file is no lines, and
// a last line cut short (a harness killed mid-write) is skipped.
func readLedger(store string) ([]ledgerLine, error) {
	f, err := os.Open(filepath.Join(store, ledgerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var raw [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		raw = append(raw, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []ledgerLine
	for i, b := range raw {
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var l ledgerLine
		if err := json.Unmarshal(b, &l); err != nil {
			if i == len(raw)-1 {
				break // cut short by a harness that died mid-write
			}
			return nil, fmt.Errorf("%s line %d: %w", filepath.Join(store, ledgerFile), i+1, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// indexEntry is one run in index.json: what identifies it and what it
// found, without timings, so two sweeps of the same seeds compare equal.
type indexEntry struct {
	Target   string   `json:"target"`
	Mutant   string   `json:"mutant,omitempty"`
	Scenario string   `json:"scenario"`
	Seed     uint64   `json:"seed"`
	Status   string   `json:"status"`
	Failing  []string `json:"failing,omitempty"` // checker/kind of every violation, sorted, once each
	Dir      string   `json:"dir"`
	Kept     bool     `json:"kept"`
}

func statusWord(v models.Verdict) string {
	if v.Error != "" {
		return "error"
	}
	return string(v.Status)
}

// failingOf lists what made a run non-valid: checker/kind of each violation,
// checker (unknown) of each unknown result.
func failingOf(v models.Verdict) []string {
	var out []string
	for _, r := range v.Results {
		switch r.Status {
		case models.Invalid:
			for _, vi := range r.Violations {
				c := vi.Checker
				if c == "" {
					c = r.Checker
				}
				out = append(out, c+"/"+vi.Kind)
			}
			if len(r.Violations) == 0 {
				out = append(out, r.Checker)
			}
		case models.Unknown:
			out = append(out, r.Checker+" (unknown)")
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// writeMerged writes index.html, junit.xml and index.json for runs, whose
// Dir is relative to dir.
func writeMerged(dir, indexPath string, runs []reports.RunSummary) (junitPath string, err error) {
	if indexPath == "" {
		indexPath = filepath.Join(dir, reports.IndexFile)
	}
	base := filepath.Dir(indexPath)
	sorted := append([]reports.RunSummary(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Verdict.Run, sorted[j].Verdict.Run
		if a.Target != b.Target {
			return a.Target < b.Target
		}
		if a.Mutant != b.Mutant {
			return a.Mutant < b.Mutant
		}
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.Seed != b.Seed {
			return a.Seed < b.Seed
		}
		return sorted[i].Dir < sorted[j].Dir
	})
	var idx bytes.Buffer
	if err := reports.WriteIndex(&idx, sorted); err != nil {
		return "", err
	}
	var vs []models.Verdict
	var entries []indexEntry
	for _, r := range sorted {
		vs = append(vs, r.Verdict)
		v := r.Verdict
		entries = append(entries, indexEntry{Target: v.Run.Target, Mutant: v.Run.Mutant, Scenario: v.Run.Scenario, Seed: v.Run.Seed,
			Status: statusWord(v), Failing: failingOf(v), Dir: filepath.ToSlash(r.Dir), Kept: !r.Summarized})
	}
	var junit bytes.Buffer
	if err := reports.WriteJUnitRuns(&junit, vs); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return "", err
	}
	junitPath = filepath.Join(base, reports.JUnitFile)
	for p, b := range map[string][]byte{indexPath: idx.Bytes(), junitPath: junit.Bytes(), filepath.Join(base, indexJSONFile): append(js, '\n')} {
		if err := runstore.WriteFile(p, b); err != nil {
			return "", err
		}
	}
	return junitPath, nil
}

// sweep runs many seeds: one line per run on stdout (seed, verdict,
// duration, what failed), the full checker table only for a non-valid run,
// a live progress bar on stderr when it is a terminal, and at the end the
// merged index, a merged JUnit and a one-line summary.
type sweep struct {
	out, keep, shard, seedsSpec string
	total                       int
	stdout, stderr              io.Writer
	tty, color                  bool
	start                       time.Time

	mu       sync.Mutex
	runSeed  uint64
	runStart time.Time
	phase    string // of the current run, from the harness's status callback
	stopTick chan struct{}
	done     int
	counts   map[string]int
	elapsed  time.Duration
	current  string
	runs     []reports.RunSummary
	kept     int
	ledgerOK bool
}

func newSweep(out, keep, seedsSpec, shard string, total int, stdout, stderr io.Writer) *sweep {
	return &sweep{out: out, keep: keep, shard: shard, seedsSpec: seedsSpec, total: total, stdout: stdout, stderr: stderr,
		tty: isTerminal(stderr), color: isTerminal(stderr) && isTerminal(stdout), start: time.Now(), counts: map[string]int{}, ledgerOK: true}
}

// status is the harness's per-second callback while seed's workload runs.
func (s *sweep) status(seed uint64) func(harness.Status) {
	return func(st harness.Status) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.phase = fmt.Sprintf("%s orders %d/%d", st.Phase, st.Invoked, st.Planned)
		s.setCurrentLocked()
		s.drawLocked()
	}
}

func (s *sweep) setCurrentLocked() {
	s.current = fmt.Sprintf("seed %d: %s %s", s.runSeed, s.phase, time.Since(s.runStart).Truncate(time.Second))
}

// begin announces the next run on the progress line, which a ticker then
// redraws every second (the harness reports only during the workload).
func (s *sweep) begin(seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runSeed, s.runStart, s.phase = seed, time.Now(), "starting"
	s.current = fmt.Sprintf("seed %d: starting", seed)
	s.drawLocked()
	if s.tty && s.stopTick == nil {
		s.stopTick = make(chan struct{})
		go s.tick(s.stopTick)
	}
}

func (s *sweep) tick(stop chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.current != "" {
				s.setCurrentLocked()
				s.drawLocked()
			}
			s.mu.Unlock()
		}
	}
}

func (s *sweep) failures() int { return s.done - s.counts["valid"] }

// drawLocked redraws the progress line (TTY only): a bar, runs done/total,
// failures so far, the ETA from the mean run time, and the current run.
func (s *sweep) drawLocked() {
	if !s.tty {
		return
	}
	filled := 0
	if s.total > 0 {
		filled = s.done * progressBarLen / s.total
	}
	eta := "…"
	if s.done > 0 {
		left := time.Duration(int64(s.elapsed) / int64(s.done) * int64(s.total-s.done))
		eta = fmtDuration(left)
	}
	fail := fmt.Sprintf("%d failing", s.failures())
	if s.color && s.failures() > 0 {
		fail = "\x1b[31m" + fail + "\x1b[0m"
	}
	fmt.Fprintf(s.stderr, "\r\x1b[K[%s%s] %d/%d runs  %s  ETA %s  %s",
		strings.Repeat("#", filled), strings.Repeat("-", progressBarLen-filled), s.done, s.total, fail, eta, s.current)
}

func (s *sweep) clearLocked() {
	if s.tty {
		fmt.Fprint(s.stderr, "\r\x1b[K")
	}
}

func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= time.Hour {
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// record takes one finished run: prints its line (and its table if it is
// not valid), writes its summary line, removes a valid run's directory under
// --keep failing, and returns the run's exit code.
func (s *sweep) record(seed uint64, res harness.Result, runErr error, dur time.Duration) int {
	v := res.Verdict
	code := v.Status.ExitCode()
	if runErr != nil {
		code = 2
		if v.Error == "" {
			v.Error = runErr.Error()
		}
	}
	word := statusWord(v)
	nonValid := code != 0
	kept := s.keep == keepAll || nonValid || res.RunDir == ""
	base := filepath.Base(res.RunDir)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	detail := ""
	switch {
	case v.Error != "":
		detail = oneLine(errors.New(v.Error))
		if len(detail) > 160 {
			detail = detail[:159] + "…"
		}
	case nonValid:
		detail = strings.Join(failingOf(v), ", ")
	}
	shown := strings.ToUpper(word)
	if word == "valid" {
		shown = "valid"
	}
	line := fmt.Sprintf("seed %-6d %-8s %7.1fs", seed, shown, dur.Seconds())
	if detail != "" {
		line += "  " + detail
	}
	if s.color && nonValid {
		line = "\x1b[31m" + line + "\x1b[0m"
	}
	fmt.Fprintln(s.stdout, line)
	if nonValid {
		if res.RunDir != "" && runErr == nil {
			_ = reports.WriteTerminal(s.stdout, v, filepath.Join(res.RunDir, "report.html"), s.color)
		}
		if res.RunDir != "" {
			fmt.Fprintf(s.stdout, "replay the exact scenario.json: sagachaos repro %s\n", res.RunDir)
		}
	}
	if res.RunDir != "" {
		l := ledgerLine{Dir: base, Kept: kept, DurationMS: dur.Milliseconds(), Shard: s.shard, Verdict: v}
		if err := appendLedger(s.out, l); err != nil {
			// Without its summary line a valid run must keep its directory.
			fmt.Fprintf(s.stderr, "sagachaos: %v; keeping %s\n", err, res.RunDir)
			kept, s.ledgerOK = true, false
		}
		if !kept {
			if err := os.RemoveAll(res.RunDir); err != nil {
				fmt.Fprintf(s.stderr, "sagachaos: remove %s: %v\n", res.RunDir, err)
			}
		}
		s.runs = append(s.runs, reports.RunSummary{Dir: base, Verdict: v, Summarized: !kept, Elapsed: dur})
	}
	if kept {
		s.kept++
	}
	s.done++
	s.counts[word]++
	s.elapsed = time.Since(s.start)
	s.current = ""
	s.drawLocked()
	return code
}

// finish writes the merged index and JUnit and prints the one-line summary.
func (s *sweep) finish(interrupted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopTick != nil {
		close(s.stopTick)
		s.stopTick = nil
	}
	s.clearLocked()
	where := "seeds " + s.seedsSpec
	if s.shard != "" {
		where += " shard " + s.shard
	}
	state := ""
	if interrupted {
		state = " (interrupted)"
	}
	fmt.Fprintf(s.stdout, "\nsweep %s: %d/%d runs%s, %d valid, %d invalid, %d unknown, %d error in %s; kept %d run dirs, %d summarised in %s\n",
		where, s.done, s.total, state, s.counts["valid"], s.counts["invalid"], s.counts["unknown"], s.counts["error"],
		fmtDuration(time.Since(s.start)), s.kept, s.done-s.kept, filepath.Join(s.out, ledgerFile))
	if len(s.runs) == 0 {
		return
	}
	idx := filepath.Join(s.out, reports.IndexFile)
	junit, err := writeMerged(s.out, idx, s.runs)
	if err != nil {
		fmt.Fprintf(s.stderr, "sagachaos: merged index: %v\n", err)
		return
	}
	fmt.Fprintf(s.stdout, "index: %s  junit: %s  (all runs in the store: sagachaos report %s)\n", idx, junit, s.out)
}

// collectRuns resolves report's arguments: run directories, and stores
// (directories of run directories, with or without a summary.jsonl). A
// summary line stands for its run only when the run's directory is gone.
func collectRuns(args []string) ([]reports.RunSummary, error) {
	var out []reports.RunSummary
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, reports.HistoryFile)); err == nil {
			out = append(out, reports.RunSummary{Dir: a})
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		have := map[string]bool{}
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(a, e.Name(), reports.HistoryFile)); err == nil {
				out = append(out, reports.RunSummary{Dir: filepath.Join(a, e.Name())})
				have[e.Name()] = true
			}
		}
		lines, err := readLedger(a)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		for _, l := range lines {
			if have[l.Dir] {
				continue
			}
			out = append(out, reports.RunSummary{Dir: filepath.Join(a, l.Dir), Verdict: l.Verdict, Summarized: true,
				Elapsed: time.Duration(l.DurationMS) * time.Millisecond})
		}
	}
	return out, nil
}
