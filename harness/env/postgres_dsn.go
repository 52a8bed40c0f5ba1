package env

import (
	"context"
	"fmt"
	"net/url"
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

func openDSNPG(ctx context.Context, dsn string) (*dsnPG, error) {
	if dsn == "" {
		return nil, unavailable("postgres: --postgres dsn selected but no DSN given",
			"set "+EnvPostgresDSN+"=postgres://user:pass@host:5432/postgres or pass --postgres-dsn", nil)
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, unavailable("postgres: DSN "+redact(dsn)+" is not a postgres:// URL",
			"use the form postgres://user:pass@host:5432/postgres", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return nil, unavailable("postgres: cannot reach DSN "+redact(dsn),
			"start that server, fix "+EnvPostgresDSN+", or use --postgres local", err)
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
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("postgres dsn %s: drop database %s: %w", p.host, db, err)
		}
	}
	p.created = nil
	return firstErr
}

// redact hides a password in a DSN for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable dsn)"
	}
	return u.Redacted()
}
