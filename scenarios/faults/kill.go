package faults

import (
	"context"

	"pgregory.net/rapid"
)

// Kill SIGKILLs a component instance and keeps it down for the window,
// then starts it again. An instance that is already dead is not killed
// again (the journal says so), and overlapping kills compose: it starts
// again when the last of them ends.
type Kill struct{}

func init() { Register(func() Kind { return &Kill{} }) }

// Name implements Kind.
func (*Kill) Name() string { return "kill" }

// Doc implements Kind.
func (*Kill) Doc() string { return "SIGKILLs an instance, restarts it when the window ends" }

// Validate implements Kind.
func (*Kill) Validate() error { return nil }

// Draw implements Kind: any component instance.
func (*Kill) Draw(t *rapid.T, a Aim) (string, bool) {
	if len(a.Components) == 0 {
		return "", false
	}
	return Pick(t, a.Components, "component"), true
}

// Apply implements Kind.
func (*Kill) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	c := s.Components()
	out, err := c.Stop(ctx, f.Target, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out},
		Undo: func(ctx context.Context) (map[string]string, error) {
			out, err := c.Start(ctx, f.Target, f.ID)
			return map[string]string{"action": "restart", "effect": out}, err
		},
	}, nil
}
