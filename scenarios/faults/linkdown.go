package faults

import (
	"context"

	"pgregory.net/rapid"
)

// LinkDown cuts a link: its listener and every open connection are closed
// until the window ends. Overlapping cuts of one link compose: it comes back
// when the last of them ends.
type LinkDown struct{}

func init() { Register(func() Kind { return &LinkDown{} }) }

// Name implements Kind.
func (*LinkDown) Name() string { return "link-down" }

// Doc implements Kind.
func (*LinkDown) Doc() string {
	return "cuts a link (listener and open connections closed) for the window"
}

// Validate implements Kind.
func (*LinkDown) Validate() error { return nil }

// Draw implements Kind: any link.
func (*LinkDown) Draw(t *rapid.T, a Aim) (string, bool) { return drawLink(t, a) }

// Apply implements Kind.
func (*LinkDown) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	l, err := s.Link(f.Target)
	if err != nil {
		return Effect{}, err
	}
	out, err := l.Down(f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out},
		Undo: func(context.Context) (map[string]string, error) {
			out, err := l.Up(f.ID)
			return map[string]string{"effect": out}, err
		},
	}, nil
}
