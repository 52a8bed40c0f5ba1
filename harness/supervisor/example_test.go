package supervisor_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/sagachaos/sagachaos/harness/supervisor"
)

// The pattern a harness uses: kill everything on return (deferred calls
// also run on a panic), let a first Ctrl-C cancel the run and a second one
// end it at once through the abort hooks; the watchdog and Pdeathsig cover
// a harness that is SIGKILLed.
func Example() {
	ctx, stop := supervisor.NotifyContext(context.Background())
	defer stop()
	sup := supervisor.New(slog.Default())
	defer sup.KillAll()
	defer supervisor.OnAbort(func() { _ = sup.KillAll() })()

	p, err := sup.Start(ctx, supervisor.Spec{
		Name:      "relay-1",
		Command:   []string{"./bin/relay"},
		Env:       []string{"SAGACHAOS_INSTANCE=relay-1"},
		LogDir:    "runs/r1/logs",
		HealthURL: "http://127.0.0.1:18080/healthz",
	})
	if err != nil {
		return // exit code 2: the target could not start
	}
	if err := sup.WaitHealthy(ctx, p, 30*time.Second); err != nil {
		return // the error names the process, its exit status and its last log lines
	}
	// nemesis: p.Kill(); p.Restart(ctx); p.Pause(); p.Resume() ...
}
