package explore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/sagachaos/sagachaos/harness"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// HarnessRunner runs candidates for real with harness.Run, each in its own
// run directory under Dir named after the candidate.
type HarnessRunner struct {
	// Base is used for every run; its Scenario, RunDir and Repro are set
	// per candidate.
	Base harness.Options
	Dir  string
	// Replay, when set, makes the replay line a run's verdict carries from
	// its run directory.
	Replay func(runDir string) string
	// KeepRuns keeps the run directory of every run; otherwise a valid
	// run that reached nothing new is removed (its record stays in the
	// campaign journal).
	KeepRuns bool
	// Tune, when set, adjusts each candidate's scenario before it runs
	// (--time-limit); the candidate itself, as the corpus keeps it, is
	// unchanged.
	Tune func(*scenarios.Scenario)
}

// Run implements Runner.
func (r *HarnessRunner) Run(ctx context.Context, c Candidate) (Result, error) {
	o := r.Base
	o.Scenario = c.Scenario
	if r.Tune != nil {
		r.Tune(&o.Scenario)
	}
	o.RunDir = filepath.Join(r.Dir, c.Name)
	if r.Replay != nil {
		o.Repro = r.Replay(o.RunDir)
	}
	start := time.Now()
	res, err := harness.Run(ctx, o)
	out := Result{RunDir: res.RunDir, Elapsed: time.Since(start)}
	if err != nil {
		var ie *harness.InputError
		if ctx.Err() != nil || errors.As(err, &ie) {
			return out, err
		}
		out.Err = err.Error()
		return out, nil
	}
	out.Status = res.Verdict.Status
	out.Violations = ViolationKeys(res.Verdict)
	if h, err := models.ReadHistoryFile(filepath.Join(res.RunDir, runstore.HistoryFile)); err == nil {
		out.Signature = Compute(h)
	}
	return out, nil
}

// Discard implements Discarder.
func (r *HarnessRunner) Discard(res Result) {
	if r.KeepRuns || res.RunDir == "" || res.Status != models.Valid {
		return
	}
	_ = os.RemoveAll(res.RunDir)
}
