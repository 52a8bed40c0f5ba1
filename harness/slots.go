package harness

import (
	"context"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/nemesis"
	"github.com/sagachaos/sagachaos/harness/slots"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// slotSampleEvery is how often the replication slots are sampled into the
// history during a run.
const slotSampleEvery = 250 * time.Millisecond

// watchSlots starts sampling the replication slots the target declares
// (a CDC relay's) from target-up on, and gives them to the nemesis's CDC
// kinds. The returned func stops the sampler and records the sample at
// observation; it does nothing for a target without slots.
func watchSlots(l *loop, m *targets.Manifest, sc scenarios.Scenario, e *env.Env, nem *nemesis.Nemesis) func(context.Context) {
	decls := slots.Decls(m, sc.Replicas, e.ServerDatabase)
	if len(decls) == 0 {
		return func(context.Context) {}
	}
	w := slots.New(decls, e.DirectDSN(decls[0].DB), l.log)
	nem.Slots = w
	stop := w.Start(l.rec, slotSampleEvery)
	l.cleanup(stop)
	return func(ctx context.Context) {
		stop()
		w.Sample(ctx, l.rec, models.SlotsAtObserve)
	}
}
