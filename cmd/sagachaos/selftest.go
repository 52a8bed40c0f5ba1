package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/gate"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/scenarios"
)

func cmdSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		targetName = fs.String("target", "reference", "target whose mutants to test")
		mutants    = fs.String("mutants", "", "comma-separated mutants (default: all; none: only the reference runs)")
		mSeeds     = fs.Int("mutant-seeds", 5, "seeds tried per mutant before it counts as escaped")
		dSeeds     = fs.Int("detect-seeds", 1, "catching seeds per mutant to measure time-to-detect (median, worst)")
		reference  = fs.String("reference", "", "comma-separated scenarios for the correct target (default: all named)")
		rSeeds     = fs.Int("reference-seeds", 2, "seeds per reference scenario")
		out        = fs.String("out", "runs/selftest", "directory for the run directories")
		general    = fs.String("scenarios", "", "comma-separated scenarios every mutant and the reference run on instead of their own (e.g. swarm,everything: the general search alone)")
		scale      = fs.Float64("scale", 1, "scale every scenario (orders, duration, faults, rounds)")
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
	noMutants := *mutants == "none"
	if noMutants {
		*mutants = ""
	}
	for _, mu := range split(*mutants) {
		if err := target.ValidateMutant(m, mu); err != nil {
			return fail(2, "%v", err)
		}
	}
	for _, sc := range append(split(*general), split(*reference)...) {
		if _, err := scenarios.Load(sc); err != nil {
			return fail(2, "%v", err)
		}
	}
	if *scale <= 0 {
		return fail(2, "--scale %v: want a positive factor", *scale)
	}
	o := gate.Options{Manifest: m, Bin: bin, Failpts: fps, OutDir: *out,
		Env:     harness.Options{Env: ef.config(), Logger: newLogger(stderr, false), HealthTimeout: *health},
		Mutants: split(*mutants), NoMutants: noMutants, MutantSeeds: *mSeeds, DetectSeeds: *dSeeds,
		Reference: split(*reference), ReferenceSeeds: *rSeeds, Scenarios: split(*general), Scale: *scale}
	if !*quiet {
		o.Progress = func(s string) { fmt.Fprintln(stderr, "selftest:", s) }
	}
	rep, err := gate.Run(ctx, o)
	if err != nil {
		return fail(2, "selftest: %v", err)
	}
	rep.Write(stdout)
	if f, err := os.Create(filepath.Join(*out, "gate.tsv")); err == nil {
		rep.WriteTSV(f)
		f.Close()
	}
	if !rep.Passed() {
		return &exitError{code: 1}
	}
	return nil
}
