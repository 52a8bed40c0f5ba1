package supervisor

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// BenchmarkStartKill measures one start + SIGKILL + reap of a real process,
// what a nemesis kill/restart cycle costs the harness.
func BenchmarkStartKill(b *testing.B) {
	sup := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer sup.KillAll()
	p, err := sup.Start(context.Background(), Spec{Name: "bench", Command: []string{"sleep", "1000"}, LogDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := p.Kill(); err != nil {
			b.Fatal(err)
		}
		if err := p.Restart(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
