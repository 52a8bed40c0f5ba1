package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sagachaosEnv runs the CLI with extra environment variables.
func sagachaosEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(cliBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sagachaos %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// The DSN's password is printed by no help text and no flag error of any
// subcommand, whether it is in the environment or given as a flag (issue 10
// item 6: the environment's value used to be the flag's default).
func TestSecretsStayOutOfHelpAndFlagErrors(t *testing.T) {
	env := []string{
		"SAGACHAOS_POSTGRES_DSN=postgres://u:hunter2@db.example:5432/x",
		"SAGACHAOS_KAFKA_BROKERS=hunter2-broker.example:9092",
	}
	subcommands := [][]string{{"run"}, {"repro"}, {"selftest"}, {"env", "up"}, {"check"}, {"report"}, {"list"}, {"version"}, {"help"}}
	bad := [][]string{{"--help"}, {"-h"}, {"--no-such-flag"}, {"--seed", "not-a-number"}, {"--postgres-dsn"},
		{"--postgres-dsn", "postgres://u:hunter2@db.example:5432/x", "--no-such-flag"},
		{"--kafka-brokers", "hunter2-broker.example:9092", "--health-timeout", "soon"}}
	for _, sub := range subcommands {
		for _, b := range bad {
			args := append(append([]string(nil), sub...), b...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := sagachaosEnv(t, env, args...)
				if strings.Contains(r.stdout+r.stderr, "hunter2") {
					t.Fatalf("exit %d; the output holds the secret:\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				if sub[0] != "version" && sub[0] != "help" && r.code != 2 {
					t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
			})
		}
	}
	// The help still says where the defaults come from.
	for _, sub := range [][]string{{"run"}, {"repro"}, {"selftest"}, {"env", "up"}} {
		r := sagachaosEnv(t, env, append(sub, "--help")...)
		for _, want := range []string{"SAGACHAOS_POSTGRES_DSN", "SAGACHAOS_KAFKA_BROKERS"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s --help does not mention %s:\n%s", strings.Join(sub, " "), want, r.stderr)
			}
		}
	}
}

// SAGACHAOS_POSTGRES_DSN or SAGACHAOS_KAFKA_BROKERS alone selects its
// provider; an explicit flag wins; the message names where the value came
// from and says the dial error once (issue 10 items 3 and 13).
func TestEnvSelectsProvider(t *testing.T) {
	const dsn = "SAGACHAOS_POSTGRES_DSN=postgres://x:pw@127.0.0.1:1/x?connect_timeout=2"
	cases := []struct {
		name  string
		env   []string
		args  []string
		wants []string
		not   []string
	}{
		{"env dsn alone", []string{dsn}, nil,
			[]string{"cannot reach DSN postgres://x:xxxxx@127.0.0.1:1/x", "(dial tcp 127.0.0.1:1: connect: connection refused)", "fix SAGACHAOS_POSTGRES_DSN"}, []string{"pw@"}},
		{"flag dsn", nil, []string{"--postgres-dsn", "postgres://x:pw@127.0.0.1:1/x?connect_timeout=2"},
			[]string{"cannot reach DSN", "fix --postgres-dsn"}, []string{"SAGACHAOS_POSTGRES_DSN", "pw@"}},
		{"flag dsn wins over env dsn", []string{"SAGACHAOS_POSTGRES_DSN=postgres://x@127.0.0.1:2/x"}, []string{"--postgres-dsn", "postgres://x:pw@127.0.0.1:1/x?connect_timeout=2"},
			[]string{"cannot reach DSN postgres://x:xxxxx@127.0.0.1:1/x", "fix --postgres-dsn"}, []string{"127.0.0.1:2"}},
		{"explicit provider wins over env dsn", []string{dsn}, []string{"--postgres", "testcontainers"},
			[]string{"Docker"}, []string{"cannot reach DSN"}},
		{"env brokers alone", []string{"SAGACHAOS_KAFKA_BROKERS=127.0.0.1:1"}, nil,
			[]string{"cannot reach brokers 127.0.0.1:1", "fix SAGACHAOS_KAFKA_BROKERS"}, nil},
		{"explicit kafka wins over env brokers", []string{"SAGACHAOS_KAFKA_BROKERS=127.0.0.1:1"}, []string{"--kafka", "kfake", "--postgres", "testcontainers"},
			[]string{"Docker"}, []string{"brokers"}},
		{"dsn with another provider", nil, []string{"--postgres", "local", "--postgres-dsn", "postgres://x:pw@127.0.0.1:1/x"},
			[]string{"--postgres-dsn is given but --postgres local does not use it"}, []string{"pw@"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"run", "--scenario", "calm", "--seed", "1", "--out", out}, c.args...)
			r := sagachaosEnv(t, c.env, args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			lines := errorLines(r.stderr)
			if len(lines) != 1 {
				t.Fatalf("want one error line, got %q\nstderr: %s", lines, r.stderr)
			}
			for _, w := range c.wants {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error line lacks %q: %s", w, lines[0])
				}
			}
			for _, w := range c.not {
				if strings.Contains(lines[0], w) {
					t.Errorf("error line holds %q: %s", w, lines[0])
				}
			}
			if n := strings.Count(lines[0], "connection refused"); n > 1 {
				t.Errorf("the dial error is said %d times: %s", n, lines[0])
			}
			if strings.Contains(r.stdout, "VALID") {
				t.Errorf("a run on an unreachable server gave a verdict: %s", r.stdout)
			}
		})
	}
}
