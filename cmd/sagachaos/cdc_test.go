package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/harness/env"
)

// A target that needs wal_level=logical (reference-cdc's manifest says so)
// against an external server that does not have it: exit 2, one line
// naming the setting, no verdict, and nothing left on the server or on
// the machine.
func TestExternalServerLackingASettingExitsTwo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The "external" server: a cluster with PostgreSQL's defaults.
	ext, err := env.Up(ctx, env.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	dsn := ext.DirectDSN("postgres")
	before := serverDatabases(t, ctx, dsn)
	out := t.TempDir()
	r := sagachaos(t, "run", "--target", "reference-cdc", "--scenario", "calm", "--postgres", "dsn", "--postgres-dsn", dsn, "--out", out)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := errorLines(r.stderr)
	if len(lines) != 1 || !strings.Contains(lines[0], "wal_level=replica (the target needs logical)") {
		t.Fatalf("want one error line naming wal_level, got %q\nstderr: %s", lines, r.stderr)
	}
	if strings.Contains(r.stdout, "VALID") {
		t.Fatalf("a verdict for an environment error: %s", r.stdout)
	}
	if after := serverDatabases(t, ctx, dsn); !slices.Equal(before, after) {
		t.Errorf("databases left on the refused server: before %v, after %v", before, after)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	for _, d := range dirs {
		assertNothingLeft(t, d)
	}
	t.Logf("%s", lines[0])
}

func serverDatabases(t *testing.T, ctx context.Context, dsn string) []string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(ctx, `SELECT datname FROM pg_database ORDER BY 1`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}
