package faults

import (
	"context"

	"pgregory.net/rapid"
)

// LimitData closes a link's connections once a number of bytes went
// through in one direction (toxiproxy limit_data): on the default
// downstream an answer is cut mid-response.
type LimitData struct {
	Bytes  int    `json:"bytes" doc:"bytes let through before the connection is closed"`
	Stream Stream `json:"stream" doc:"upstream (the requests) or downstream (the answers)"`
}

func init() { Register(func() Kind { return &LimitData{Bytes: 1024, Stream: Downstream} }) }

// Name implements Kind.
func (*LimitData) Name() string { return "limit-data" }

// Doc implements Kind.
func (*LimitData) Doc() string {
	return "closes a link's connections after N bytes, for the window (toxiproxy limit_data)"
}

// Validate implements Kind.
func (p *LimitData) Validate() error {
	if p.Bytes < 0 {
		return Bad(p, "bytes", "%d is negative", p.Bytes)
	}
	return p.Stream.Check(p, "stream")
}

// Draw implements Kind: a link, 16–4096 bytes.
func (p *LimitData) Draw(t *rapid.T, a Aim) (string, bool) {
	link, ok := drawLink(t, a)
	if !ok {
		return "", false
	}
	p.Bytes = rapid.IntRange(16, 4096).Draw(t, "bytes")
	return link, true
}

// Apply implements Kind.
func (p *LimitData) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	return applyToxic(s, f, "limit_data", p.Stream, map[string]any{"bytes": p.Bytes})
}
