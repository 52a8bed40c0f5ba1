package faults

import (
	"context"

	"pgregory.net/rapid"
)

// ResetPeer resets a link's connections as soon as data flows in one
// direction (toxiproxy reset_peer): on the default downstream a request
// acts and its caller sees ECONNRESET instead of the answer.
type ResetPeer struct {
	Stream Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &ResetPeer{Stream: Downstream} }) }

// Name implements Kind.
func (*ResetPeer) Name() string { return "reset-peer" }

// Doc implements Kind.
func (*ResetPeer) Doc() string {
	return "resets a link's connections (TCP RST) for the window (toxiproxy reset_peer)"
}

// Validate implements Kind.
func (p *ResetPeer) Validate() error { return p.Stream.Check(p, "stream") }

// Draw implements Kind: any link.
func (*ResetPeer) Draw(t *rapid.T, a Aim) (string, bool) { return drawLink(t, a) }

// Apply implements Kind.
func (p *ResetPeer) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "reset_peer", p.Stream, map[string]any{"timeout": 0})
}
