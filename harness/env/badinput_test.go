package env

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	hangup := hangUpListener(t)
	tests := []struct {
		name  string
		cfg   Config
		env   map[string]string
		wants []string // substrings of the one-line message
		once  string   // a substring that must appear exactly once
		not   []string // substrings the message must not hold
	}{
		{"unreachable dsn", Config{Postgres: "dsn", PostgresDSN: "postgres://postgres:secret@127.0.0.1:1/postgres?connect_timeout=2"},
			nil, []string{"cannot reach DSN", "127.0.0.1:1", "fix the DSN", "--postgres local"}, "connection refused", []string{EnvPostgresDSN}},
		{"unreachable dsn from a flag", Config{PostgresDSN: "postgres://postgres:secret@127.0.0.1:1/postgres?connect_timeout=2", PostgresDSNFrom: "--postgres-dsn"},
			nil, []string{"cannot reach DSN", "dial tcp 127.0.0.1:1", "fix --postgres-dsn"}, "connection refused", []string{EnvPostgresDSN}},
		{"unreachable dsn from the environment alone", Config{},
			map[string]string{EnvPostgresDSN: "postgres://u:secret@127.0.0.1:1/x?connect_timeout=2"},
			[]string{"cannot reach DSN", "dial tcp 127.0.0.1:1", "fix " + EnvPostgresDSN}, "connection refused", []string{"failed to connect"}},
		{"dsn server hangs up", Config{PostgresDSN: "postgres://u:secret@" + hangup + "/x?connect_timeout=2"},
			nil, []string{"cannot reach DSN", hangup}, "", []string{"->", "failed to connect"}},
		{"explicit provider wins over the environment", Config{Postgres: "testcontainers"},
			map[string]string{EnvPostgresDSN: "postgres://u:secret@127.0.0.1:1/x"}, []string{"Docker"}, "", []string{"cannot reach DSN"}},
		{"dsn given with another provider", Config{Postgres: "local", PostgresDSN: "postgres://u:secret@127.0.0.1:1/x", PostgresDSNFrom: "--postgres-dsn"},
			nil, []string{"--postgres-dsn is given but --postgres local does not use it"}, "", nil},
		{"dsn not a url", Config{Postgres: "dsn", PostgresDSN: "host=x"}, nil, []string{"not a postgres:// URL"}, "", nil},
		{"key=value dsn is not echoed", Config{PostgresDSN: "host=db password=secret", PostgresDSNFrom: "--postgres-dsn"}, nil,
			[]string{"the DSN of --postgres-dsn is not a postgres:// URL"}, "", nil},
		{"query password is not echoed", Config{PostgresDSN: "postgres://u@127.0.0.1:1/x?password=secret&connect_timeout=2"}, nil,
			[]string{"cannot reach DSN", "password=xxxxx"}, "", nil},
		{"dsn missing", Config{Postgres: "dsn"}, map[string]string{EnvPostgresDSN: ""}, []string{"no DSN given", EnvPostgresDSN}, "", nil},
		{"missing postgres binaries (empty PATH, no pg_config)", Config{}, map[string]string{"PATH": ""},
			[]string{"local binaries not found", "looked in PATH", "install postgresql-15", "--postgres dsn"}, "", nil},
		{"postgres bindir override missing", Config{}, map[string]string{EnvPGBinDir: "/nonexistent"},
			[]string{"local binaries not found in " + EnvPGBinDir + "=/nonexistent", "--postgres dsn"}, "", nil},
		{"docker absent for postgres", Config{Postgres: "testcontainers"}, nil, []string{"Docker", "embedded default"}, "", nil},
		{"docker absent for kafka", Config{Kafka: "testcontainers"}, nil, []string{"Docker", "embedded default"}, "", nil},
		{"unreachable brokers", Config{Kafka: "brokers", KafkaBrokers: []string{"127.0.0.1:1"}}, nil,
			[]string{"cannot reach brokers", "127.0.0.1:1", "--kafka kfake", "fix the broker list"}, "", []string{EnvKafkaBrokers}},
		{"unreachable brokers from the environment alone", Config{}, map[string]string{EnvKafkaBrokers: "127.0.0.1:1"},
			[]string{"cannot reach brokers", "127.0.0.1:1", "fix " + EnvKafkaBrokers}, "", nil},
		{"explicit kafka wins over the environment", Config{Kafka: "testcontainers"}, map[string]string{EnvKafkaBrokers: "127.0.0.1:1"},
			[]string{"Docker"}, "", []string{"cannot reach brokers"}},
		{"unknown provider", Config{Postgres: "mysql"}, nil, []string{"unknown provider", "local, dsn or testcontainers"}, "", nil},
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
			if tc.once != "" && strings.Count(msg, tc.once) != 1 {
				t.Errorf("message says %q %d times, want once: %s", tc.once, strings.Count(msg, tc.once), msg)
			}
			for _, w := range tc.not {
				if strings.Contains(msg, w) {
					t.Errorf("message holds %q: %s", w, msg)
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

// hangUpListener accepts connections and closes them at once: a server
// that is there but does not speak PostgreSQL.
func hangUpListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Resolve: a DSN or broker list alone selects its provider, whether it is
// given or in the environment; an explicit provider wins over the
// environment; a DSN beside a provider that ignores it is an error.
func TestResolve(t *testing.T) {
	const dsn, dsn2 = "postgres://u:pw@db:5432/x", "postgres://v:pw@other:5432/y"
	tests := []struct {
		name                  string
		cfg                   Config
		env                   map[string]string
		pg, gotDSN, from      string
		kafka, brokers, kfrom string
		err                   string
	}{
		{"defaults", Config{}, nil, "local", "", "", "kfake", "", "", ""},
		{"env dsn selects dsn", Config{}, map[string]string{EnvPostgresDSN: dsn}, "dsn", dsn, EnvPostgresDSN, "kfake", "", "", ""},
		{"env brokers select brokers", Config{}, map[string]string{EnvKafkaBrokers: " b1:9092, b2:9092 ,"}, "local", "", "", "brokers", "b1:9092,b2:9092", EnvKafkaBrokers, ""},
		{"explicit dsn provider takes the env dsn", Config{Postgres: "dsn"}, map[string]string{EnvPostgresDSN: dsn}, "dsn", dsn, EnvPostgresDSN, "kfake", "", "", ""},
		{"explicit local wins over env", Config{Postgres: "local"}, map[string]string{EnvPostgresDSN: dsn}, "local", "", "", "kfake", "", "", ""},
		{"explicit kfake wins over env", Config{Kafka: "kfake"}, map[string]string{EnvKafkaBrokers: "b1:9092"}, "local", "", "", "kfake", "", "", ""},
		{"given dsn wins over env", Config{PostgresDSN: dsn2, PostgresDSNFrom: "--postgres-dsn"}, map[string]string{EnvPostgresDSN: dsn}, "dsn", dsn2, "--postgres-dsn", "kfake", "", "", ""},
		{"given dsn alone selects dsn", Config{PostgresDSN: dsn}, nil, "dsn", dsn, "the DSN", "kfake", "", "", ""},
		{"given brokers alone select brokers", Config{KafkaBrokers: []string{"b:1"}}, nil, "local", "", "", "brokers", "b:1", "the broker list", ""},
		{"dsn with local", Config{Postgres: "local", PostgresDSN: dsn}, nil, "", "", "", "", "", "", "does not use it"},
		{"brokers with testcontainers", Config{Kafka: "testcontainers", KafkaBrokers: []string{"b:1"}}, nil, "", "", "", "", "", "", "does not use it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.Resolve(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want an unavailable error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Postgres != tc.pg || got.PostgresDSN != tc.gotDSN || got.PostgresDSNFrom != tc.from {
				t.Errorf("postgres = %q %q (from %q), want %q %q (from %q)", got.Postgres, got.PostgresDSN, got.PostgresDSNFrom, tc.pg, tc.gotDSN, tc.from)
			}
			if got.Kafka != tc.kafka || strings.Join(got.KafkaBrokers, ",") != tc.brokers || got.KafkaBrokersFrom != tc.kfrom {
				t.Errorf("kafka = %q %v (from %q), want %q %q (from %q)", got.Kafka, got.KafkaBrokers, got.KafkaBrokersFrom, tc.kafka, tc.brokers, tc.kfrom)
			}
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
