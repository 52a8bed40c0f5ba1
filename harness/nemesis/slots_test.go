package nemesis

import (
	"context"
	"sync"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// fakeSlots is a slot held by "component", with "component-2" waiting:
// what faults.Example aims the CDC kinds at.
type fakeSlots struct {
	mu    sync.Mutex
	reads int
}

func (f *fakeSlots) Slot(_ context.Context, db string) (faults.SlotView, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	return faults.SlotView{DB: db, Name: "outbox_" + db, Exists: true, Active: true, Holder: "component", PID: 42,
		ConfirmedLSN: "0/16B3748", CurrentLSN: "0/16B3800", LagBytes: 184}, nil
}

func (f *fakeSlots) Instances(string) []string { return []string{"component", "component-2"} }
