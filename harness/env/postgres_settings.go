package env

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/testcontainers/testcontainers-go"
)

// PostgreSQL settings a target needs (the manifest's postgres.settings,
// Config.PostgresSettings) are applied by every provider:
//
//   - local: every setting is a "-c name=value" of the postmaster, at
//     every start (restart-only settings such as wal_level included, and a
//     crash restart starts with them again). The few that only initdb can
//     set (data_checksums, wal_segment_size) are initdb options, and the
//     cached template is keyed by them.
//   - testcontainers: the same "-c" arguments appended to the server's
//     command, initdb's options in POSTGRES_INITDB_ARGS.
//   - dsn: the server is the user's; each setting is checked with SHOW
//     before anything is created on it, and a server that lacks one is
//     refused (ErrUnavailable: exit code 2), naming every setting it lacks.
//
// Every provider's server is checked with SHOW after it is up, so a
// setting that did not take is never silently missing.

// initdbSettings are settings fixed when the cluster is made: name → how
// initdb takes them.
var initdbSettings = map[string]func(v string) (string, error){
	"data_checksums": func(v string) (string, error) {
		switch strings.ToLower(v) {
		case "on", "true", "yes", "1":
			return "--data-checksums", nil
		case "off", "false", "no", "0":
			return "", nil
		}
		return "", fmt.Errorf("data_checksums=%q: want on or off", v)
	},
	"wal_segment_size": func(v string) (string, error) {
		mb := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(v)), "MB"), "M")
		n, err := strconv.Atoi(mb)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("wal_segment_size=%q: want a size in MB such as 16MB", v)
		}
		return "--wal-segsize=" + strconv.Itoa(n), nil
	},
}

// sortedSettings returns the setting names in order.
func sortedSettings(s map[string]string) []string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// serverArgs are the postmaster arguments of the settings: "-c", "k=v"
// for every setting that is not fixed at initdb, sorted by name.
func serverArgs(s map[string]string) []string {
	var out []string
	for _, k := range sortedSettings(s) {
		if _, fixed := initdbSettings[k]; fixed {
			continue
		}
		out = append(out, "-c", k+"="+s[k])
	}
	return out
}

// initdbArgs are the initdb options of the settings fixed at initdb.
func initdbArgs(s map[string]string) ([]string, error) {
	var out []string
	for _, k := range sortedSettings(s) {
		f, fixed := initdbSettings[k]
		if !fixed {
			continue
		}
		a, err := f(s[k])
		if err != nil {
			return nil, unavailable("postgres: setting "+k, "fix postgres.settings in the manifest", err)
		}
		if a != "" {
			out = append(out, a)
		}
	}
	return out, nil
}

// templateKey names a template made with initdb options args: "" for
// none (the plain template), else a short hash.
func templateKey(args []string) string {
	if len(args) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return fmt.Sprintf("-%x", sum[:4])
}

// settingOK reports whether the server's value have satisfies the
// required value want: an integer minimum for a max_* setting, otherwise
// the same value (booleans in any of PostgreSQL's spellings, other values
// case-insensitively).
func settingOK(name, have, want string) bool {
	have, want = strings.TrimSpace(have), strings.TrimSpace(want)
	if strings.HasPrefix(name, "max_") {
		w, werr := strconv.ParseInt(want, 10, 64)
		h, herr := strconv.ParseInt(have, 10, 64)
		if werr == nil && herr == nil {
			return h >= w
		}
	}
	if b, ok := pgBool(want); ok {
		if h, ok := pgBool(have); ok {
			return b == h
		}
	}
	return strings.EqualFold(have, want)
}

func pgBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "on", "true", "yes", "1":
		return true, true
	case "off", "false", "no", "0":
		return false, true
	}
	return false, false
}

// checkSettings asks the server behind dsn for every required setting with
// SHOW and refuses it (ErrUnavailable, one line) when one is missing or
// has another value, naming each. where says which server ("DSN
// postgres://…", "the embedded cluster") and fix what to do.
func checkSettings(ctx context.Context, dsn string, want map[string]string, where, fix string) error {
	if len(want) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return unavailable("postgres: cannot check the settings of "+where, "start that server or use --postgres local", settingsConnectCause(err))
	}
	defer conn.Close(context.Background())
	var bad []string
	restart := false
	for _, k := range sortedSettings(want) {
		var have string
		err := conn.QueryRow(ctx, "SHOW "+pgx.Identifier{k}.Sanitize()).Scan(&have)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "42704":
			bad = append(bad, fmt.Sprintf("%s (needs %s; the server has no such setting)", k, want[k]))
			continue
		case err != nil:
			return unavailable("postgres: SHOW "+k+" on "+where, "check that the DSN's user may read settings", err)
		}
		if settingOK(k, have, want[k]) {
			continue
		}
		what := fmt.Sprintf("%s=%s (the target needs %s)", k, have, want[k])
		if strings.HasPrefix(k, "max_") {
			what = fmt.Sprintf("%s=%s (the target needs at least %s)", k, have, want[k])
		}
		bad = append(bad, what)
		var when string
		if conn.QueryRow(ctx, `SELECT context FROM pg_settings WHERE name = $1`, k).Scan(&when) == nil && when == "postmaster" {
			restart = true
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if restart {
		fix += " (a restart-only setting: set it in postgresql.conf and restart the server)"
	}
	return unavailable(fmt.Sprintf("postgres: %s lacks settings the target needs (manifest postgres.settings): %s", where, strings.Join(bad, ", ")), fix, nil)
}

// settingsConnectCause is the cause of a failed connection, without pgx's
// repetition of the whole connection string.
func settingsConnectCause(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return errors.New(s[i+2:])
	}
	return err
}

// containerSettings are the container options of the settings: the server
// arguments appended to the image's command, initdb's in
// POSTGRES_INITDB_ARGS (the official image's variable).
func containerSettings(s map[string]string) ([]testcontainers.ContainerCustomizer, error) {
	var out []testcontainers.ContainerCustomizer
	if a := serverArgs(s); len(a) > 0 {
		out = append(out, testcontainers.WithCmdArgs(a...))
	}
	ia, err := initdbArgs(s)
	if err != nil {
		return nil, err
	}
	if len(ia) > 0 {
		out = append(out, testcontainers.WithEnv(map[string]string{"POSTGRES_INITDB_ARGS": strings.Join(ia, " ")}))
	}
	return out, nil
}
