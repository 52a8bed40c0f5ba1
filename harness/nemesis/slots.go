package nemesis

import (
	"errors"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

var _ faults.SlotSystem = system{}

// Slots implements faults.SlotSystem: the CDC kinds ask it who holds a
// slot.
func (s system) Slots() (faults.Slots, error) {
	if s.n.Slots == nil {
		return nil, errors.New("the target declares no replication slots (manifest processes[].slots)")
	}
	return s.n.Slots, nil
}
