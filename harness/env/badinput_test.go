package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ownDataDirs lists the postgres data dirs this test process created.
func ownDataDirs() []string {
	d, _ := filepath.Glob(filepath.Join(pgDataRoot(), fmt.Sprintf("%s%d-*", pgDirPrefix, os.Getpid())))
	return d
}

func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

func TestBadInputs(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		env   map[string]string
		wants []string // substrings of the one-line message
	}{
		{"unreachable dsn", Config{Postgres: "dsn", PostgresDSN: "postgres://postgres:secret@127.0.0.1:1/postgres?connect_timeout=2"},
			nil, []string{"cannot reach DSN", "127.0.0.1:1", "SAGACHAOS_POSTGRES_DSN", "--postgres local"}},
		{"dsn not a url", Config{Postgres: "dsn", PostgresDSN: "host=x"}, nil, []string{"not a postgres:// URL"}},
		{"dsn missing", Config{Postgres: "dsn"}, map[string]string{EnvPostgresDSN: ""}, []string{"no DSN given", EnvPostgresDSN}},
		{"missing postgres binaries (empty PATH, no pg_config)", Config{}, map[string]string{"PATH": ""},
			[]string{"local binaries not found", "looked in PATH", "install postgresql-15", "--postgres dsn"}},
		{"postgres bindir override missing", Config{}, map[string]string{EnvPGBinDir: "/nonexistent"},
			[]string{"local binaries not found in " + EnvPGBinDir + "=/nonexistent", "--postgres dsn"}},
		{"docker absent for postgres", Config{Postgres: "testcontainers"}, nil, []string{"Docker", "embedded default"}},
		{"docker absent for kafka", Config{Kafka: "testcontainers"}, nil, []string{"Docker", "embedded default"}},
		{"unreachable brokers", Config{Kafka: "brokers", KafkaBrokers: []string{"127.0.0.1:1"}}, nil,
			[]string{"cannot reach brokers", "127.0.0.1:1", "--kafka kfake"}},
		{"unknown provider", Config{Postgres: "mysql"}, nil, []string{"unknown provider", "local, dsn or testcontainers"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := tc.env["PATH"]; ok {
				old := pgSearchGlob
				pgSearchGlob = "/nonexistent/*/bin"
				t.Cleanup(func() { pgSearchGlob = old })
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			beforeDirs, beforeFDs := len(ownDataDirs()), openFDs()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e, err := Up(ctx, tc.cfg)
			if err == nil {
				e.Close()
				t.Fatal("Up succeeded")
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("error is not ErrUnavailable: %v", err)
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("message leaks the password: %q", msg)
			}
			for _, w := range tc.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
			if n := len(ownDataDirs()); n != beforeDirs {
				t.Errorf("data dirs: %d before, %d after", beforeDirs, n)
			}
			// Listeners (kfake, toxiproxy) closed again: fds back to where
			// they were once closing goroutines have run.
			eventually(t, "fds released", func() error {
				if n := openFDs(); n > beforeFDs {
					return fmt.Errorf("%d open fds, %d before", n, beforeFDs)
				}
				return nil
			})
		})
	}
}

// TestExternalProviders points the "dsn" and "brokers" providers at a local
// env's server and kfake cluster: per-run databases and topics appear with
// the run prefix and are gone after Close.
func TestExternalProviders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	host := upTestEnv(t, ctx)
	ext, err := Up(ctx, Config{
		Postgres: "dsn", PostgresDSN: host.DirectDSN("postgres"),
		Kafka: "brokers", KafkaBrokers: host.DirectBrokers(),
		Databases: []string{"orders"}, Topics: []Topic{{Name: "events", Partitions: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	wantDB := "sc_" + ext.RunID() + "_orders"
	if got := dbOf(ext.DirectDSN("orders")); got != wantDB {
		t.Fatalf("DirectDSN db %q, want %q", got, wantDB)
	}
	if got := ext.TopicName("events"); got != "sc_"+ext.RunID()+"_events" {
		t.Fatalf("TopicName %q", got)
	}
	if _, err := ext.KafkaLink("relay-1"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("KafkaLink on brokers provider: %v, want ErrUnsupported", err)
	}
	if err := ext.CrashPostgres(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("CrashPostgres on dsn provider: %v, want ErrUnsupported", err)
	}
	proxied, err := ext.ProxiedDSN("orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := pingDSN(ctx, proxied); err != nil {
		t.Fatalf("proxied dsn on dsn provider: %v", err)
	}
	topics := func() map[string]bool {
		cl := kafkaClient(t, host.DirectBrokers())
		md, err := kadmClient(cl).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, d := range md.Sorted() {
			out[d.Topic] = true
		}
		return out
	}
	if !topics()[ext.TopicName("events")] {
		t.Fatalf("topic %s not created", ext.TopicName("events"))
	}
	if err := ext.Close(); err != nil {
		t.Fatal(err)
	}
	if topics()[ext.TopicName("events")] {
		t.Errorf("topic %s not deleted on Close", ext.TopicName("events"))
	}
	if err := pingDSN(ctx, host.DirectDSN(wantDB)); err == nil {
		t.Errorf("database %s still exists after Close", wantDB)
	}
}

// TestUpFailureTearsDown fails Up after PostgreSQL and kfake are running (a
// duplicate database) and finds both gone: no data dir, fds released.
func TestUpFailureTearsDown(t *testing.T) {
	beforeDirs, beforeFDs := len(ownDataDirs()), openFDs()
	e, err := Up(context.Background(), Config{Databases: []string{"orders", "template1"}})
	if err == nil {
		e.Close()
		t.Fatal("Up creating database template1 succeeded")
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("a failed CREATE DATABASE is not an unavailable environment: %v", err)
	}
	t.Logf("error: %v", err)
	if n := len(ownDataDirs()); n != beforeDirs {
		t.Errorf("data dirs: %d before, %d after", beforeDirs, n)
	}
	eventually(t, "fds released", func() error {
		if n := openFDs(); n > beforeFDs {
			return fmt.Errorf("%d open fds, %d before", n, beforeFDs)
		}
		return nil
	})
}

func TestCloseIdempotent(t *testing.T) {
	e, err := Up(context.Background(), Config{Databases: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if _, err := e.ProxiedDSN("orders", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.KafkaBrokersFor("relay-1"); err != nil {
		t.Fatal(err)
	}
	e.Describe(&sb)
	t.Logf("Describe:\n%s", sb.String())
	for i := 0; i < 3; i++ {
		if err := e.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if _, err := e.NewLink("x→y", "127.0.0.1:1"); err == nil {
		t.Error("NewLink after Close succeeded")
	}
}
