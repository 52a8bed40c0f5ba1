package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/gate"
	"github.com/sagachaos/sagachaos/harness/target"
)

func cmdSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		targetName = fs.String("target", "reference", "target whose mutants to test")
		mutants    = fs.String("mutants", "", "comma-separated mutants (default: all)")
		mSeeds     = fs.Int("mutant-seeds", 5, "seeds tried per mutant before it counts as escaped")
		dSeeds     = fs.Int("detect-seeds", 1, "catching seeds per mutant to measure time-to-detect (median, worst)")
		reference  = fs.String("reference", "", "comma-separated scenarios for the correct target (default: all named)")
		rSeeds     = fs.Int("reference-seeds", 2, "seeds per reference scenario")
		out        = fs.String("out", "runs/selftest", "directory for the run directories")
		quiet      = fs.Bool("q", false, "no progress lines")
		health     = fs.Duration("health-timeout", 30*time.Second, "how long each component may take to become healthy")
	)
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	m, err := target.Find(*targetName)
	if err != nil {
		return fail(2, "%v", err)
	}
	bin, fps, err := target.Prepare(ctx, m, "")
	if err != nil {
		return fail(2, "%v", err)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, mu := range split(*mutants) {
		if err := target.ValidateMutant(m, mu); err != nil {
			return fail(2, "%v", err)
		}
	}
	o := gate.Options{Manifest: m, Bin: bin, Failpts: fps, OutDir: *out,
		Env:     harness.Options{Env: ef.config(), Logger: newLogger(stderr, false), HealthTimeout: *health},
		Mutants: split(*mutants), MutantSeeds: *mSeeds, DetectSeeds: *dSeeds,
		Reference: split(*reference), ReferenceSeeds: *rSeeds}
	if !*quiet {
		o.Progress = func(s string) { fmt.Fprintln(stderr, "selftest:", s) }
	}
	rep, err := gate.Run(ctx, o)
	if err != nil {
		return fail(2, "selftest: %v", err)
	}
	rep.Write(stdout)
	if !rep.Passed() {
		return &exitError{code: 1}
	}
	return nil
}
