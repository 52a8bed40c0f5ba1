package env

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cdcSettings are what a CDC relay's manifest asks for.
var cdcSettings = map[string]string{"wal_level": "logical", "max_replication_slots": "16", "max_wal_senders": "16"}

func show(t *testing.T, ctx context.Context, dsn string, names ...string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	out := map[string]string{}
	for _, n := range names {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+n).Scan(&v); err != nil {
			t.Fatalf("SHOW %s: %v", n, err)
		}
		out[n] = v
	}
	return out
}

// The embedded cluster starts with the manifest's settings, restart-only
// ones included, and keeps them across a crash and restart.
func TestEmbeddedClusterHonoursSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := map[string]string{"wal_level": "logical", "max_replication_slots": "16", "max_wal_senders": "16", "wal_sender_timeout": "30s"}
	e, err := Up(ctx, Config{Dir: t.TempDir(), Databases: []string{"orders"}, PostgresSettings: want})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer e.Close()
	names := sortedSettings(want)
	if got := show(t, ctx, e.DirectDSN("orders"), names...); !equalSettings(got, want) {
		t.Fatalf("SHOW after start = %v, want %v", got, want)
	}
	if err := e.CrashPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.RestartPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if got := show(t, ctx, e.DirectDSN("orders"), names...); !equalSettings(got, want) {
		t.Fatalf("SHOW after a crash restart = %v, want %v", got, want)
	}
	// A logical slot can be made, which it cannot at the default
	// wal_level=replica.
	conn, err := pgx.Connect(ctx, e.DirectDSN("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot('settings_test', 'pgoutput')`); err != nil {
		t.Fatalf("create a logical slot with wal_level=logical: %v", err)
	}
}

func equalSettings(got, want map[string]string) bool {
	for k, v := range want {
		if !settingOK(k, got[k], v) {
			return false
		}
	}
	return true
}

// An external server that lacks a setting is refused before anything is
// created on it: one line, naming every setting it lacks.
func TestDSNLackingSettingsIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The "external" server: an embedded cluster with the defaults
	// (wal_level=replica, max_replication_slots=10).
	ext, err := Up(ctx, Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Up (external server): %v", err)
	}
	defer ext.Close()
	dsn := ext.DirectDSN("postgres")
	before := databases(t, ctx, dsn)
	_, err = Up(ctx, Config{Postgres: "dsn", PostgresDSN: dsn, Databases: []string{"orders", "inventory"},
		Topics: []Topic{{Name: "orders", Partitions: 1}}, PostgresSettings: cdcSettings})
	if err == nil {
		t.Fatal("Up with a server lacking wal_level=logical succeeded")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error is not ErrUnavailable (exit code 2): %v", err)
	}
	msg := err.Error()
	for _, s := range []string{"wal_level=replica (the target needs logical)", "max_replication_slots=10 (the target needs at least 16)", "max_wal_senders=10 (the target needs at least 16)", "restart"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message does not say %q:\n%s", s, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message is not one line:\n%s", msg)
	}
	if after := databases(t, ctx, dsn); !slices.Equal(before, after) {
		t.Errorf("databases left on the refused server: before %v, after %v", before, after)
	}
	t.Logf("refused: %s", msg)

	// A requirement the server meets (an integer minimum below its value,
	// a boolean in another spelling) is accepted.
	ok, err := Up(ctx, Config{Postgres: "dsn", PostgresDSN: dsn, Databases: []string{"orders"},
		PostgresSettings: map[string]string{"max_replication_slots": "4", "fsync": "false", "wal_level": "Replica"}})
	if err != nil {
		t.Fatalf("Up with met settings: %v", err)
	}
	if err := ok.Close(); err != nil {
		t.Fatal(err)
	}
}

// A run's databases on an external server are dropped even when a CDC
// relay left its replication slot in one (DROP DATABASE refuses that).
func TestDSNCloseDropsSlots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ext, err := Up(ctx, Config{Dir: t.TempDir(), PostgresSettings: cdcSettings})
	if err != nil {
		t.Fatalf("Up (external server): %v", err)
	}
	defer ext.Close()
	dsn := ext.DirectDSN("postgres")
	before := databases(t, ctx, dsn)
	e, err := Up(ctx, Config{Postgres: "dsn", PostgresDSN: dsn, Databases: []string{"orders"}, PostgresSettings: cdcSettings})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	conn, err := pgx.Connect(ctx, e.DirectDSN("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot('outbox_left_behind', 'pgoutput')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := e.Close(); err != nil {
		t.Fatalf("Close with a slot in a run database: %v", err)
	}
	if after := databases(t, ctx, dsn); !slices.Equal(before, after) {
		t.Errorf("databases left: before %v, after %v", before, after)
	}
}

func databases(t *testing.T, ctx context.Context, dsn string) []string {
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

func TestSettingOK(t *testing.T) {
	for _, c := range []struct {
		name, have, want string
		ok               bool
	}{
		{"wal_level", "logical", "logical", true},
		{"wal_level", "replica", "logical", false},
		{"wal_level", "LOGICAL", "logical", true},
		{"max_wal_senders", "20", "16", true},
		{"max_wal_senders", "10", "16", false},
		{"max_wal_senders", "16", "16", true},
		{"fsync", "off", "false", true},
		{"fsync", "on", "0", false},
		{"wal_sender_timeout", "30s", "30s", true},
		{"wal_sender_timeout", "1min", "30s", false},
		{"max_stack_depth", "2MB", "2MB", true}, // not an integer: compared as is
	} {
		if got := settingOK(c.name, c.have, c.want); got != c.ok {
			t.Errorf("settingOK(%s, have %q, want %q) = %v", c.name, c.have, c.want, got)
		}
	}
}

func TestSettingArgs(t *testing.T) {
	s := map[string]string{"wal_level": "logical", "max_wal_senders": "16", "data_checksums": "on", "wal_segment_size": "32MB"}
	if got, want := serverArgs(s), []string{"-c", "max_wal_senders=16", "-c", "wal_level=logical"}; !slices.Equal(got, want) {
		t.Errorf("serverArgs = %v, want %v", got, want)
	}
	ia, err := initdbArgs(s)
	if err != nil || !slices.Equal(ia, []string{"--data-checksums", "--wal-segsize=32"}) {
		t.Errorf("initdbArgs = %v, %v", ia, err)
	}
	if templateKey(nil) != "" || templateKey(ia) == "" || templateKey(ia) == templateKey(ia[:1]) {
		t.Errorf("template keys: none %q, both %q, one %q", templateKey(nil), templateKey(ia), templateKey(ia[:1]))
	}
	if _, err := initdbArgs(map[string]string{"data_checksums": "maybe"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("bad data_checksums: %v", err)
	}
	if opts, err := containerSettings(s); err != nil || len(opts) != 2 {
		t.Errorf("containerSettings: %d options, %v", len(opts), err)
	}
}
