package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// endGrace is how long fault windows that opened near the end of the
// workload may run their course before heal closes them: the heal step
// must not erase the fault the seed asked for.
const endGrace = 5 * time.Second

// chaos is the workload stage: the clients and the nemesis run together,
// both appending to the history, bounded by the scenario's time limit.
func chaos(ctx context.Context, l *loop, sc scenarios.Scenario, drv *workload.Driver, nem *nemesis.Nemesis, tg *target.Target) error {
	wctx, cancel := context.WithTimeout(ctx, sc.Limits.TimeLimit.D())
	defer cancel()
	workloadDone, healNow := make(chan struct{}), make(chan struct{})
	var nemWG sync.WaitGroup
	nemWG.Go(func() { nem.Run(wctx, sc.Faults, drv.Subscribe, workloadDone, healNow) })
	stopStatus := l.statusLine(drv, nem, tg)
	defer stopStatus()

	werr := drv.Run(wctx, sc.Workload)
	close(workloadDone)
	waitOrHeal(wctx, &nemWG, endGrace)
	close(healNow)
	nemWG.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return fmt.Errorf("workload: %w", werr)
	}
	if wctx.Err() != nil {
		l.rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "time-limit", "note": "workload stopped at the time limit"})
	}
	return nil
}

// waitOrHeal waits for the nemesis to finish on its own, at most d.
func waitOrHeal(ctx context.Context, wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// heal is the heal stage: every link restored, PostgreSQL up, every
// component resumed or restarted and healthy again.
func heal(ctx context.Context, l *loop, m *targets.Manifest, e *env.Env, tg *target.Target) {
	hctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := e.HealAll(); err != nil {
		l.log.Warn("heal links", "err", err)
	}
	// Restart PostgreSQL only if it is down (a db-crash whose window was cut
	// short): restarting a live server would be a fault nobody planned.
	if len(m.Databases) > 0 && !postgresUp(hctx, e.DirectDSN(m.Databases[0])) {
		err := e.RestartPostgres(hctx)
		l.rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "heal", "action": "restart postgres", "error": errString(err)})
		if err != nil && !errors.Is(err, env.ErrUnsupported) {
			l.log.Warn("postgres restart during heal", "err", err)
		}
	}
	healed, err := tg.Heal(hctx)
	if err != nil {
		l.log.Warn("heal target", "err", err)
		l.rec.Record(models.ProcHarness, models.Info, models.FPhase, "", map[string]string{"name": "heal", "error": err.Error()})
	}
	l.rec.Record(models.ProcHarness, models.Info, models.FHealed, "", healed)
}

// postgresUp reports whether the server answers a query within two
// seconds.
func postgresUp(ctx context.Context, dsn string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx) == nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
