package faults

import (
	"context"
	"strconv"

	"pgregory.net/rapid"
)

// GatewayAmbiguous makes the payment gateway's next charges ambiguous: the
// charge is applied, then answered 500 or never answered. Injections queue:
// a second one does not replace a pending one.
type GatewayAmbiguous struct {
	Mode  string `json:"mode" doc:"500 (answer an error) or hang (never answer)"`
	Count int    `json:"count" doc:"charges made ambiguous"`
}

func init() { Register(func() Kind { return &GatewayAmbiguous{Mode: "500", Count: 1} }) }

// Name implements Kind.
func (*GatewayAmbiguous) Name() string { return "gateway-ambiguous" }

// Doc implements Kind.
func (*GatewayAmbiguous) Doc() string {
	return "the gateway applies its next N charges, then answers 500 or hangs"
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

// Draw implements Kind: 500 or hang, 1–3 charges.
func (p *GatewayAmbiguous) Draw(t *rapid.T, _ Aim) (string, bool) {
	p.Mode = "500"
	if rapid.Bool().Draw(t, "hang") {
		p.Mode = "hang"
	}
	p.Count = drawCount(t, 3)
	return "", true
}

// Apply implements Kind: an instant fault.
func (p *GatewayAmbiguous) Apply(_ context.Context, s System, _ Fault) (Effect, error) {
	g, err := s.Gateway()
	if err != nil {
		return Effect{}, err
	}
	if err := g.InjectAmbiguous(p.Mode, p.Count); err != nil {
		return Effect{}, err
	}
	return Effect{Detail: map[string]string{"effect": "queued", "mode": p.Mode, "count": strconv.Itoa(p.Count)}}, nil
}
