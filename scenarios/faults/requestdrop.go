package faults

import (
	"context"

	"pgregory.net/rapid"
)

// RequestDrop loses the requests sent over a link during the window: they
// leave the caller — its write succeeds — and never reach the server
// (toxiproxy timeout on the upstream). With timeout_ms 0 the connection
// stays open and silent until the window ends, so the caller waits for its
// own deadline; otherwise the link closes it after timeout_ms. Either way
// the caller cannot tell a lost request from a lost answer (blackhole,
// reset-peer downstream), which is the ambiguity a saga step's retry and
// idempotency must survive — except that here the server never acted.
type RequestDrop struct {
	TimeoutMS int    `json:"timeout_ms" doc:"close the connection this long after the drop starts, in ms; 0: hold it open until the window ends"`
	Stream    Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &RequestDrop{Stream: Upstream} }) }

// Name implements Kind.
func (*RequestDrop) Name() string { return "request-drop" }

// Doc implements Kind.
func (*RequestDrop) Doc() string {
	return "loses the requests sent over a link for the window: sent, never received (toxiproxy timeout upstream)"
}

// Validate implements Kind.
func (p *RequestDrop) Validate() error {
	if p.TimeoutMS < 0 {
		return Bad(p, "timeout_ms", "%d is negative", p.TimeoutMS)
	}
	return p.Stream.Check(p, "stream")
}

// Draw implements Kind: a link; the connection held open or closed after
// up to 2 s.
func (p *RequestDrop) Draw(t *rapid.T, a Aim) (string, bool) {
	link, ok := drawLink(t, a)
	if !ok {
		return "", false
	}
	p.TimeoutMS = rapid.IntRange(0, 2000).Draw(t, "timeout")
	return link, true
}

// Apply implements Kind: the toxic for the window, removed by the undo.
func (p *RequestDrop) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "timeout", p.Stream, map[string]any{"timeout": p.TimeoutMS})
}
