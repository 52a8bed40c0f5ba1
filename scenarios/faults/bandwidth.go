package faults

import (
	"context"

	"pgregory.net/rapid"
)

// Bandwidth limits the throughput of a link in one direction (toxiproxy
// bandwidth).
type Bandwidth struct {
	RateKB int    `json:"rate_kb" doc:"throughput, in KB/s"`
	Stream Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &Bandwidth{RateKB: 8, Stream: Downstream} }) }

// Name implements Kind.
func (*Bandwidth) Name() string { return "bandwidth" }

// Doc implements Kind.
func (*Bandwidth) Doc() string {
	return "limits a link's throughput for the window (toxiproxy bandwidth)"
}

// Validate implements Kind.
func (p *Bandwidth) Validate() error {
	if p.RateKB < 0 {
		return Bad(p, "rate_kb", "%d is negative", p.RateKB)
	}
	return p.Stream.Check(p, "stream")
}

// Draw implements Kind: a link, 1–64 KB/s.
func (p *Bandwidth) Draw(t *rapid.T, a Aim) (string, bool) {
	link, ok := drawLink(t, a)
	if !ok {
		return "", false
	}
	p.RateKB = rapid.IntRange(1, 64).Draw(t, "rate")
	return link, true
}

// Apply implements Kind.
func (p *Bandwidth) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "bandwidth", p.Stream, map[string]any{"rate": p.RateKB})
}
