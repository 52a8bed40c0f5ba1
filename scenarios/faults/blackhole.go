package faults

import (
	"context"

	"pgregory.net/rapid"
)

// Blackhole swallows a link's data in one direction without closing it
// (toxiproxy timeout 0): on the default downstream the requests arrive and
// act, and the answers never come back.
type Blackhole struct {
	Stream Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &Blackhole{Stream: Downstream} }) }

// Name implements Kind.
func (*Blackhole) Name() string { return "blackhole" }

// Doc implements Kind.
func (*Blackhole) Doc() string {
	return "swallows a link's data, connection held open, for the window (toxiproxy timeout 0)"
}

// Validate implements Kind.
func (p *Blackhole) Validate() error { return p.Stream.Check(p, "stream") }

// Draw implements Kind: any link.
func (*Blackhole) Draw(t *rapid.T, a Aim) (string, bool) { return drawLink(t, a) }

// Apply implements Kind.
func (p *Blackhole) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "timeout", p.Stream, map[string]any{"timeout": 0})
}
