package faults

import (
	"context"

	"pgregory.net/rapid"
)

// This file holds what the link kinds share: drawing a link and adding a
// toxic for the fault's window. Each link kind is its own file.

// drawLink draws the link a link fault acts on.
func drawLink(t *rapid.T, a Aim) (string, bool) {
	if len(a.Links) == 0 {
		return "", false
	}
	return Pick(t, a.Links, "link"), true
}

// applyToxic adds a toxiproxy toxic of typ, named after the fault, to the
// fault's link until the window ends. Toxicity stays at 1: the harness
// decides from its seed when a toxic applies.
func applyToxic(s System, f Fault, typ string, stream Stream, attrs map[string]any) (Effect, error) {
	l, err := s.Link(f.Target)
	if err != nil {
		return Effect{}, err
	}
	name := "nemesis-" + f.ID
	if err := l.AddToxic(name, typ, stream, attrs); err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": "toxic " + typ + " on " + string(stream)},
		Undo: func(context.Context) (map[string]string, error) {
			if err := l.RemoveToxic(name); err != nil {
				return nil, err
			}
			return map[string]string{"effect": "toxic removed"}, nil
		},
	}, nil
}
