package faults

import (
	"context"
	"strconv"

	"pgregory.net/rapid"
)

// GatewayAmbiguous makes the next calls of a world action ambiguous: the
// call is applied, then answered 500 or never answered. Its target is any
// provider action that declares ambiguity ("provider/action"; the order
// domain's gateway/charge); the kind keeps its older name so scenario files
// keep working. Injections queue: a second one does not replace a pending
// one.
type GatewayAmbiguous struct {
	Mode  string `json:"mode" doc:"500 (answer an error) or hang (never answer)"`
	Count int    `json:"count" doc:"charges made ambiguous"`
}

func init() { Register(func() Kind { return &GatewayAmbiguous{Mode: "500", Count: 1} }) }

// Name implements Kind.
func (*GatewayAmbiguous) Name() string { return "gateway-ambiguous" }

// Doc implements Kind.
func (*GatewayAmbiguous) Doc() string {
	return "a world action that declares ambiguity (target provider/action) applies its next N calls, then answers 500 or hangs"
}

// Validate implements Kind.
func (p *GatewayAmbiguous) Validate() error {
	if p.Mode != "500" && p.Mode != "hang" {
		return Bad(p, "mode", "%q is not 500 or hang", p.Mode)
	}
	if p.Count < 1 {
		return Bad(p, "count", "%d is below 1", p.Count)
	}
	return nil
}

// Draw implements Kind: an action that declares ambiguity (no draw when
// there is one), 500 or hang, 1–3 calls.
func (p *GatewayAmbiguous) Draw(t *rapid.T, a Aim) (string, bool) {
	var target string
	switch len(a.Ambiguous) {
	case 0:
		return "", false
	case 1:
		target = a.Ambiguous[0]
	default:
		target = Pick(t, a.Ambiguous, "action")
	}
	p.Mode = "500"
	if rapid.Bool().Draw(t, "hang") {
		p.Mode = "hang"
	}
	p.Count = drawCount(t, 3)
	return target, true
}

// Apply implements Kind: an instant fault.
// An older plan names no target: the first action that declares ambiguity
// (the order domain's gateway charge).
func (p *GatewayAmbiguous) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	w, err := s.World()
	if err != nil {
		return Effect{}, err
	}
	target := f.Target
	if acts := w.AmbiguousActions(); target == "" && len(acts) > 0 {
		target = acts[0]
	}
	if err := w.InjectAmbiguous(target, p.Mode, p.Count); err != nil {
		return Effect{}, err
	}
	return Effect{Detail: map[string]string{"effect": "queued", "action": target, "mode": p.Mode, "count": strconv.Itoa(p.Count)}}, nil
}
