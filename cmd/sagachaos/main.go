// Command sagachaos is the command line of the sagachaos harness (DESIGN
// §8). It is a thin layer: flags in, harness/checkers/reports calls, exit
// codes out (0 valid, 1 violation, 2 error, 3 unknown).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sagachaos/sagachaos/harness/supervisor"
)

const usage = `sagachaos — chaos and correctness testing for sagas and transactional outboxes

usage:
  sagachaos run    [--target reference] [--mutant M] --scenario S [--seed N | --seeds 1-50 [--keep failing|all]] [--shard i/n] [--out runs] [--time-limit 3m] [--scale F] [--plan] [--shrink]
  sagachaos explore [--target reference] [--mutant M] [--scenario S] [--budget 30m] [--runs N] [--corpus DIR] [--seed N] [--scale F] [--keep-going]
                                      a coverage-guided campaign: keep the scenarios that reach something new, mutate them
  sagachaos repro  RUN_DIR|FILE [--until N | --times N]
                                      replay a run's scenario.json; --until: rerun until the violation recurs; say how faithfully
  sagachaos check  RUN_DIR            re-check a saved history offline, rewrite verdict.json
  sagachaos report RUN_DIR...         (re)render report.html; several runs: also an index.html
  sagachaos list   scenarios|faults|selectors|checkers|mutants|failpoints
  sagachaos selftest [--mutants a,b|none] [--mutant-seeds 5] [--detect-seeds 3] [--reference-seeds 2] [--scenarios swarm,everything] [--scale F]
                                      the gate: every planted bug caught by its checker, the reference never flagged
  sagachaos coverage RUN_DIR...       failpoint × fault and branch × fault matrices of saved runs
  sagachaos env up                    bring the embedded environment up until Ctrl-C
  sagachaos init [--name N]           write a commented manifest skeleton for your service (./sagachaos.json)
  sagachaos version

exit codes: 0 all valid, 1 a violation was found, 2 error (no verdict), 3 unknown (not enough evidence)
`

// exitError carries an exit code with its one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func fail(code int, format string, a ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, a...)}
}

// memoryLimit is the harness's soft memory limit unless GOMEMLIMIT says
// otherwise: the history, the checker index and the report of a 10,000-order
// run make a lot of short-lived garbage, and a limit makes the GC collect it
// before the heap doubles (measured: 644 MB peak RSS without, 403 MB with).
const memoryLimit = 350 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	// A first Ctrl-C stops the run (its faults undone within a couple of
	// seconds, nothing left behind, a run directory that says so); a second
	// one ends the harness at once.
	ctx, stop := supervisor.NotifyContext(context.Background())
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "repro":
		err = cmdRepro(ctx, args[1:], stdout, stderr)
	case "explore":
		err = cmdExplore(ctx, args[1:], stdout, stderr)
	case "check":
		err = cmdCheck(args[1:], stdout, stderr)
	case "report":
		err = cmdReport(args[1:], stdout)
	case "list":
		err = cmdList(ctx, args[1:], stdout)
	case "selftest":
		err = cmdSelftest(ctx, args[1:], stdout, stderr)
	case "coverage":
		err = cmdCoverage(ctx, args[1:], stdout, stderr)
	case "env":
		err = cmdEnv(ctx, args[1:], stdout, stderr)
	case "init":
		err = cmdInit(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "sagachaos", version())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "sagachaos: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "sagachaos:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "sagachaos:", err)
	return 2
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	lvl := slog.LevelWarn
	if verbose {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}
