package faults

import (
	"context"

	"pgregory.net/rapid"
)

// Latency delays the traffic of a link in one direction (toxiproxy
// latency).
type Latency struct {
	LatencyMS int    `json:"latency_ms" doc:"delay added to each chunk of data, in ms"`
	JitterMS  int    `json:"jitter_ms" doc:"random ± variation of the delay, in ms"`
	Stream    Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &Latency{LatencyMS: 100, Stream: Downstream} }) }

// Name implements Kind.
func (*Latency) Name() string { return "latency" }

// Doc implements Kind.
func (*Latency) Doc() string { return "delays a link's traffic for the window (toxiproxy latency)" }

// Validate implements Kind.
func (p *Latency) Validate() error {
	if p.LatencyMS < 0 {
		return Bad(p, "latency_ms", "%d is negative", p.LatencyMS)
	}
	if p.JitterMS < 0 {
		return Bad(p, "jitter_ms", "%d is negative", p.JitterMS)
	}
	return p.Stream.Check(p, "stream")
}

// Draw implements Kind: a link, 20–500 ms, jitter 0–100 ms.
func (p *Latency) Draw(t *rapid.T, a Aim) (string, bool) {
	link, ok := drawLink(t, a)
	if !ok {
		return "", false
	}
	p.LatencyMS = rapid.IntRange(20, 500).Draw(t, "latency")
	p.JitterMS = rapid.IntRange(0, 100).Draw(t, "jitter")
	return link, true
}

// Apply implements Kind.
func (p *Latency) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "latency", p.Stream, map[string]any{"latency": p.LatencyMS, "jitter": p.JitterMS})
}
