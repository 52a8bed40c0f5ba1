package env

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCrashKillsOrphanedBackends: a backend that outlives its postmaster
// (forked just before the crash, or stopped when it came) is reparented to
// init, so it is no longer the postmaster's child; it still holds the
// cluster's shared memory block, and every restart failed with
// "pre-existing shared memory block is still in use" until it went away —
// under load the database then never came back within the run. The crash
// must find such a backend by its working directory and kill it, and the
// restart must then succeed.
func TestCrashKillsOrphanedBackends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := upTestEnv(t, ctx)
	p, ok := e.pg.(*localPG)
	if !ok {
		t.Fatalf("the embedded cluster is %T, want the local one", e.pg)
	}
	conn, err := pgx.Connect(ctx, p.dsn("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	in := processesIn(p.dataDir)
	found := false
	for _, pid := range in {
		found = found || pid == backend
	}
	if !found {
		t.Fatalf("backend %d is not among the processes in %s: %v", backend, p.dataDir, in)
	}
	// Orphan the backend: stopped, it cannot notice its postmaster's death.
	pm := p.pid()
	if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(backend, syscall.SIGKILL)
	if err := syscall.Kill(pm, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ppid, ok := procStat(backend); ok && ppid != pm {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d was not reparented after its postmaster %d died", backend, pm)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.CrashPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if processAlive(backend) {
		t.Fatalf("orphaned backend %d still alive after the crash", backend)
	}
	if err := e.RestartPostgres(ctx); err != nil {
		t.Fatalf("restart after a crash that left an orphaned backend: %v", err)
	}
}
