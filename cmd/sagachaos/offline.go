package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fail(2, "check: want one RUN_DIR")
	}
	dir := args[0]
	h, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return fail(2, "%v", err)
	}
	v := checkers.Check(h)
	if old, err := reports.ReadVerdict(filepath.Join(dir, "verdict.json")); err == nil && old.Run.Scenario != "" {
		v.Run = old.Run
	}
	if h.Truncated {
		fmt.Fprintln(stderr, "sagachaos: note: the history's last line was cut short (the harness died mid-write); checked what was complete")
	}
	if err := runstore.WriteVerdict(dir, v); err != nil {
		return fail(2, "%v", err)
	}
	_ = reports.WriteTerminal(stdout, v, filepath.Join(dir, "report.html"), false)
	if c := v.Status.ExitCode(); c != 0 {
		return &exitError{code: c}
	}
	return nil
}

func cmdReport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	index := fs.String("index", "", "where to write the merged index.html (default: the runs' common parent)")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	runs, err := collectRuns(fs.Args())
	if err != nil {
		return fail(2, "%v", err)
	}
	if len(runs) == 0 {
		return fail(2, "report: no run directory (a directory with history.jsonl) or summary.jsonl in %v", fs.Args())
	}
	var dirs []string
	for i, r := range runs {
		dirs = append(dirs, r.Dir)
		if r.Summarized {
			continue // only its summary line is left (run --keep failing)
		}
		v, note, err := recheck(r.Dir)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintf(stdout, "%s: %s\n", r.Dir, note)
		}
		runs[i].Verdict = v
		fmt.Fprintln(stdout, filepath.Join(r.Dir, "report.html"))
	}
	if len(runs) > 1 {
		out := *index
		if out == "" {
			out = filepath.Join(commonParent(dirs), "index.html")
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fail(2, "%v", err)
		}
		parent := filepath.Dir(out)
		for i := range runs {
			if rel, err := filepath.Rel(parent, runs[i].Dir); err == nil {
				runs[i].Dir = rel
			}
		}
		// index.html, junit.xml (a testsuite per run) and index.json.
		junit, err := writeMerged(parent, out, runs)
		if err != nil {
			return fail(2, "%v", err)
		}
		fmt.Fprintln(stdout, out)
		fmt.Fprintln(stdout, junit)
	}
	return nil
}

// recheck re-checks a run directory's history for report: a verdict.json
// is derived data and may be stale (a history cut or edited after it was
// written, an older build's checkers), and the checkers are fast enough to
// re-derive it every time. It writes the fresh verdict.json, junit.xml and
// report.html, and says in note how the stored verdict differed. A run
// that produced no verdict (verdict.json holds an error) keeps its error.
func recheck(dir string) (v models.Verdict, note string, err error) {
	h, err := models.ReadHistoryFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return v, "", fail(2, "%v", err)
	}
	old, oerr := reports.ReadVerdict(filepath.Join(dir, "verdict.json"))
	if oerr == nil && old.Error != "" {
		return old, "", nil
	}
	v = checkers.Check(h)
	if oerr == nil && old.Run.Scenario != "" {
		v.Run = old.Run
	}
	switch {
	case oerr != nil:
		note = "no readable verdict.json (" + oerr.Error() + "): checked the history"
	case old.HistoryDigest != "" && old.HistoryDigest != v.HistoryDigest:
		note = fmt.Sprintf("verdict.json did not match history.jsonl (history digest %s, verdict made from %s): re-checked, %s → %s",
			short(v.HistoryDigest), short(old.HistoryDigest), old.Status, v.Status)
	case old.Ops != v.Ops:
		note = fmt.Sprintf("verdict.json did not match history.jsonl (%d ops, verdict made from %d): re-checked, %s → %s",
			v.Ops, old.Ops, old.Status, v.Status)
	case old.Status != v.Status:
		note = fmt.Sprintf("verdict.json did not match history.jsonl (these checkers say otherwise): re-checked, %s → %s", old.Status, v.Status)
	}
	if h.Truncated {
		note = strings.TrimPrefix(note+"; the history's last line was cut short", "; ")
	}
	if err := runstore.WriteArtifacts(dir, h, v); err != nil {
		return v, note, fail(2, "%v", err)
	}
	return v, note, nil
}

// short is a digest's first 12 hex digits, enough to tell two apart.
func short(d string) string {
	d = strings.TrimPrefix(d, models.DigestPrefix)
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

func commonParent(dirs []string) string {
	p := filepath.Dir(filepath.Clean(dirs[0]))
	for _, d := range dirs[1:] {
		for !strings.HasPrefix(filepath.Clean(d), p+string(filepath.Separator)) && p != "." && p != "/" {
			p = filepath.Dir(p)
		}
	}
	return p
}

func cmdList(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 1 {
		return fail(2, "list: want scenarios, faults, checkers, mutants or failpoints")
	}
	targetName := "reference"
	if len(args) > 1 {
		targetName = args[1]
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch args[0] {
	case "scenarios":
		for _, n := range scenarios.Names() {
			s, err := scenarios.Load(n)
			if err != nil {
				return fail(2, "%v", err)
			}
			fmt.Fprintf(tw, "%s\t%s\n", n, s.Description)
		}
	case "faults":
		writeFaults(stdout)
	case "selectors":
		for _, n := range scenarios.SelectorNames() {
			fmt.Fprintf(tw, "%s\t%s\n", n, scenarios.SelectorDoc(n))
		}
	case "checkers":
		for _, d := range checkers.Describe() {
			fmt.Fprintf(tw, "%s\t%s\n", d.Name, d.Invariant)
			for _, r := range d.Rules {
				fmt.Fprintf(tw, "\t  rule %s\n", r)
			}
		}
	case "mutants":
		m, err := target.Find(targetName)
		if err != nil {
			return fail(2, "%v", err)
		}
		fmt.Fprintf(tw, "MUTANT\tCAUGHT BY\tSCENARIOS\tTHE BUG\n")
		for _, mu := range m.Mutants {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mu.Name, strings.Join(mu.Checkers, ","), strings.Join(mu.Scenarios, ","), mu.Description)
		}
	case "failpoints":
		m, err := target.Find(targetName)
		if err != nil {
			return fail(2, "%v", err)
		}
		_, fps, err := target.Prepare(ctx, m, "")
		if err != nil {
			return fail(2, "%v", err)
		}
		sort.Slice(fps, func(i, j int) bool { return fps[i].Name < fps[j].Name })
		for _, f := range fps {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, f.Component, f.Description)
		}
	default:
		return fail(2, "list: unknown list %q (want scenarios, faults, selectors, checkers, mutants or failpoints)", args[0])
	}
	return nil
}

// writeFaults lists every fault kind of the registry: a line with its
// description, then one line per parameter with its type, default and
// meaning.
func writeFaults(w io.Writer) {
	kinds := faults.Kinds()
	nw, tw := 0, 0
	for _, k := range kinds {
		for _, p := range faults.Params(k) {
			nw = max(nw, len(p.Name))
			tw = max(tw, len(paramType(p)))
		}
	}
	for _, k := range kinds {
		fmt.Fprintf(w, "%s — %s\n", k.Name(), k.Doc())
		for _, p := range faults.Params(k) {
			fmt.Fprintf(w, "    %-*s  %-*s  %s\n", nw, p.Name, tw, paramType(p), p.Doc)
		}
	}
}

func paramType(p faults.Param) string {
	if p.Default == "" {
		return p.Type + " (no default)"
	}
	return p.Type + " = " + p.Default
}
