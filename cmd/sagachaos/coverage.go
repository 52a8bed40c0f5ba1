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

	"github.com/sagachaos/sagachaos/harness/gate"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/targets"
)

// cmdCoverage prints the failpoint × fault and branch × fault matrices of
// saved runs (e.g. a sweep of run --seeds): which declared points and
// branches the runs reached, and under which faults.
func cmdCoverage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coverage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targetName := fs.String("target", "reference", "target whose catalogue the runs are read against")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if fs.NArg() == 0 {
		return fail(2, "coverage: want RUN_DIR... (or directories of run directories)")
	}
	m, err := target.Find(*targetName)
	if err != nil {
		return fail(2, "%v", err)
	}
	_, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		return fail(2, "%v", err)
	}
	var dirs []string
	for _, a := range fs.Args() {
		if _, err := os.Stat(filepath.Join(a, "history.jsonl")); err == nil {
			dirs = append(dirs, a)
			continue
		}
		sub, _ := filepath.Glob(filepath.Join(a, "*", "history.jsonl"))
		for _, h := range sub {
			dirs = append(dirs, filepath.Dir(h))
		}
	}
	sort.Strings(dirs)
	if len(dirs) == 0 {
		return fail(2, "coverage: no run directory (with a history.jsonl) in %s", strings.Join(fs.Args(), " "))
	}
	var points []targets.Failpoint
	for _, fp := range fps {
		if !fp.IsMarker() {
			points = append(points, fp)
		}
	}
	cov, err := gate.FailpointCoverage(dirs, points)
	if err != nil {
		return fail(2, "%v", err)
	}
	fmt.Fprintln(stdout, "failpoint coverage:")
	cov.Write(stdout)
	br := gate.BranchCoverage(dirs, fps)
	fmt.Fprintln(stdout, "\nbranch × fault coverage:")
	br.Write(stdout)
	holes := append(cov.Unreached(), br.Holes()...)
	if len(holes) > 0 {
		fmt.Fprintf(stdout, "holes (never reached, or never under a fault): %s\n", strings.Join(holes, ", "))
		return &exitError{code: 1}
	}
	return nil
}
