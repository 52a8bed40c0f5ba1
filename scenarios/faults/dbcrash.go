package faults

import (
	"context"

	"pgregory.net/rapid"
)

// DBCrash SIGKILLs the PostgreSQL postmaster and restarts it (crash
// recovery) when the window ends. Overlapping crashes compose.
type DBCrash struct{}

func init() { Register(func() Kind { return &DBCrash{} }) }

// Name implements Kind.
func (*DBCrash) Name() string { return "db-crash" }

// Doc implements Kind.
func (*DBCrash) Doc() string {
	return "SIGKILLs the PostgreSQL postmaster, restarts it when the window ends"
}

// Validate implements Kind.
func (*DBCrash) Validate() error { return nil }

// Draw implements Kind: no target, nothing drawn.
func (*DBCrash) Draw(*rapid.T, Aim) (string, bool) { return "", true }

// Apply implements Kind.
func (*DBCrash) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	pg, err := s.Postgres()
	if err != nil {
		return Effect{}, err
	}
	out, err := pg.Crash(ctx, f.ID)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": out},
		Undo: func(ctx context.Context) (map[string]string, error) {
			out, err := pg.Restart(ctx, f.ID)
			return map[string]string{"action": "restart", "effect": out}, err
		},
	}, nil
}
