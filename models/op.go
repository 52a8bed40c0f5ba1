package models

import (
	"encoding/json"
	"fmt"
)

// OpType says what kind of record an Op is (DESIGN §3).
type OpType string

// The op types. Invoke/Ok/Fail/Info are client and nemesis operations
// (Info: the outcome is unknown); Effect is what the outside world saw;
// Event is a broker record; State is a final observation.
const (
	Invoke OpType = "invoke"
	Ok     OpType = "ok"
	Fail   OpType = "fail"
	Info   OpType = "info"
	Effect OpType = "effect"
	Event  OpType = "event"
	State  OpType = "state"
)

// Valid reports whether t is one of the known op types.
func (t OpType) Valid() bool {
	switch t {
	case Invoke, Ok, Fail, Info, Effect, Event, State:
		return true
	}
	return false
}

// Op is one line of a history. I is its index (dense, from 0, in the order
// the recorder accepted it); T is nanoseconds since the run's monotonic start.
// Value is kept raw so that readers decode only what they look at.
type Op struct {
	I     int64           `json:"i"`
	T     int64           `json:"t"`
	Proc  string          `json:"proc"`
	Type  OpType          `json:"type"`
	F     string          `json:"f"`
	Order string          `json:"order,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Decode unmarshals the op's value into v. An op without a value leaves v
// untouched.
func (o Op) Decode(v any) error {
	if len(o.Value) == 0 {
		return nil
	}
	if err := json.Unmarshal(o.Value, v); err != nil {
		return fmt.Errorf("op %d (%s %s): decode value: %w", o.I, o.Type, o.F, err)
	}
	return nil
}

// String renders an op compactly for terminal output and error messages.
func (o Op) String() string {
	s := fmt.Sprintf("#%d %s %s %s", o.I, o.Proc, o.Type, o.F)
	if o.Order != "" {
		s += " order=" + o.Order
	}
	if len(o.Value) > 0 {
		v := string(o.Value)
		if len(v) > 160 {
			v = v[:157] + "..."
		}
		s += " " + v
	}
	return s
}
