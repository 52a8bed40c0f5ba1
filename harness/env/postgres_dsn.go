package env

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresDSN is the default DSN of the "dsn" provider.
const EnvPostgresDSN = "SAGACHAOS_POSTGRES_DSN"

// dsnPG is an existing server. The harness owns only the per-run databases
// it created, which it drops on close; it cannot crash the server.
type dsnPG struct {
	base    string // as given, database part replaced per use
	host    string
	created []string
}

// openDSNPG checks that dsn is a reachable server; from names where the DSN
// came from (a flag, the environment variable) in the fix of a message.
func openDSNPG(ctx context.Context, dsn, from string) (*dsnPG, error) {
	if dsn == "" {
		return nil, unavailable("postgres: --postgres dsn selected but no DSN given",
			"set "+EnvPostgresDSN+"=postgres://user:pass@host:5432/postgres or pass --postgres-dsn", nil)
	}
	if from == "" {
		from = "the DSN"
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		what := "postgres: DSN " + redact(dsn) + " is not a postgres:// URL"
		if from != "the DSN" {
			what = "postgres: the DSN of " + from + " is not a postgres:// URL"
		}
		return nil, unavailable(what, "use the form postgres://user:pass@host:5432/postgres", nil)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return nil, unavailable("postgres: cannot reach DSN "+redact(dsn),
			"start that server, fix "+from+", or use --postgres local", connectCause(err))
	}
	_ = conn.Close(context.Background())
	return &dsnPG{base: dsn, host: u.Host}, nil
}

func (p *dsnPG) dsn(actual string) string { return withDatabase(p.base, actual) }
func (p *dsnPG) addr() string             { return p.host }
func (p *dsnPG) crash(context.Context) error {
	return fmt.Errorf("postgres dsn %s: crash: %w", p.host, ErrUnsupported)
}
func (p *dsnPG) restart(context.Context) error {
	return fmt.Errorf("postgres dsn %s: restart: %w", p.host, ErrUnsupported)
}
func (p *dsnPG) describe() string { return "dsn " + redact(p.base) }

func (p *dsnPG) close() error {
	if len(p.created) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.base)
	if err != nil {
		return fmt.Errorf("postgres dsn %s: drop run databases %v: %w", p.host, p.created, err)
	}
	defer conn.Close(context.Background())
	var firstErr error
	for _, db := range p.created {
		if err := dropSlots(ctx, conn, db); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("postgres dsn %s: %w", p.host, err)
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("postgres dsn %s: drop database %s: %w", p.host, db, err)
		}
	}
	p.created = nil
	return firstErr
}

// redact hides a password in a DSN for messages: the userinfo password and
// every query parameter whose name says secret (pgx reads ?password= too).
// Anything that is not a URL with a host is not shown at all: a key=value
// DSN ("host=db password=…") parses as a URL path and would be echoed whole.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "(not shown: not a URL)"
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			lk := strings.ToLower(k)
			if strings.Contains(lk, "pass") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") || strings.Contains(lk, "key") {
				q[k] = []string{"xxxxx"}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
