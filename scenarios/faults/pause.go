package faults

import (
	"context"

	"pgregory.net/rapid"
)

// Pause SIGSTOPs a component instance for the window, then SIGCONTs it (a
// GC pause, an expired lease). Overlapping pauses compose: the instance
// resumes when the last of them ends.
type Pause struct{}

func init() { Register(func() Kind { return &Pause{} }) }

// Name implements Kind.
func (*Pause) Name() string { return "pause" }

// Doc implements Kind.
func (*Pause) Doc() string { return "SIGSTOPs an instance for the window, then SIGCONTs it" }

// Validate implements Kind.
func (*Pause) Validate() error { return nil }

// Draw implements Kind: any component instance.
func (*Pause) Draw(t *rapid.T, a Aim) (string, bool) {
	if len(a.Components) == 0 {
		return "", false
	}
	return Pick(t, a.Components, "component"), true
}

// Apply implements Kind.
func (*Pause) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	c := s.Components()
	out, err := c.Pause(f.Target, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out},
		Undo: func(context.Context) (map[string]string, error) {
			out, err := c.Resume(f.Target, f.ID)
			return map[string]string{"effect": out}, err
		},
	}, nil
}
