package harness

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/checkers"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/runstore"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/models"
)

// loop is the bookkeeping every stage shares: the history, the phase and
// status line, and the cleanups that run when Run returns.
type loop struct {
	o     Options
	dir   *runstore.Dir
	rec   *models.Recorder
	log   *slog.Logger
	info  models.RunInfo
	start time.Time

	history *models.History // set by check

	mu       sync.Mutex
	status   Status
	cleanups []func()
}

// begin starts the history with its run-start op.
func begin(o Options, dir *runstore.Dir) (*loop, error) {
	info := models.RunInfo{ID: filepath.Base(dir.Path), Target: o.Manifest.Name, Mutant: o.Mutant, Scenario: o.Scenario.Name, Seed: o.Scenario.Seed, Repro: o.Repro}
	rec, err := models.NewRecorder(dir.History(), models.Header{Run: info.ID})
	if err != nil {
		return nil, err
	}
	rec.Record(models.ProcHarness, models.Info, models.FRunStart, "", info)
	return &loop{o: o, dir: dir, rec: rec, log: o.Logger, info: info, start: time.Now(), status: Status{Planned: len(o.Scenario.Workload.Sagas)}}, nil
}

// phase journals the start of a stage.
func (l *loop) phase(name string) {
	l.mu.Lock()
	l.status.Phase = name
	l.mu.Unlock()
	l.rec.Record(models.ProcHarness, models.Info, models.FPhase, "", models.Phase{Name: name})
	l.log.Info("phase", "name", name)
}

// cleanup registers f to run when Run returns, last registered first.
func (l *loop) cleanup(f func()) { l.cleanups = append(l.cleanups, f) }

// end runs the cleanups and, for a run that ended without a verdict,
// journals why and writes a verdict.json that says so.
func (l *loop) end(ctx context.Context, v models.Verdict, err error) (models.Verdict, error) {
	for i := len(l.cleanups) - 1; i >= 0; i-- {
		l.cleanups[i]()
	}
	if err == nil {
		return v, nil
	}
	if r := refusalCause(ctx); r != nil {
		err = r // the server refused the target a setting: that ended it
	}
	reason := err.Error()
	interrupted := ctx.Err() != nil && refusalCause(ctx) == nil
	if interrupted {
		l.rec.Record(models.ProcHarness, models.Info, models.FInterrupted, "", map[string]string{"reason": reason})
		err = fmt.Errorf("%w: %v", ErrInterrupted, err)
	}
	v = models.Verdict{Version: models.VerdictVersion, Status: models.Unknown, Run: l.info, Ops: l.rec.Len(), Error: reason, Interrupted: interrupted}
	_ = runstore.WriteVerdict(l.dir.Path, v)
	return v, err
}

// statusLine reports the live status every second until the returned stop
// is called.
func (l *loop) statusLine(drv *workload.Driver, nem *nemesis.Nemesis, tg *target.Target) (stop func()) {
	if l.o.Status == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				l.mu.Lock()
				s := l.status
				l.mu.Unlock()
				s.Invoked, s.Ops, s.Faults, s.Elapsed, s.Crashes = drv.Invoked(), l.rec.Len(), nem.Active(), time.Since(l.start), tg.Crashes()
				l.o.Status(s)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// check is the check stage: the run-end op, then every checker over the
// whole history.
func check(l *loop) (models.Verdict, error) {
	l.rec.Record(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int64{"elapsed_ms": time.Since(l.start).Milliseconds()})
	if err := l.rec.Err(); err != nil {
		return models.Verdict{}, err
	}
	l.history = l.rec.History()
	v := checkers.Check(l.history)
	v.Run = l.info
	return v, nil
}
