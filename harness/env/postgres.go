package env

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// pgProvider is one PostgreSQL backend. Databases are known by the names the
// target uses; actual maps them to server-side names.
type pgProvider interface {
	// dsn is a direct URL for the server-side database actual.
	dsn(actual string) string
	// addr is the host:port a link forwards to.
	addr() string
	crash(ctx context.Context) error
	restart(ctx context.Context) error
	close() error
	describe() string
}

// withHostPort rewrites a postgres URL to reach hostport instead.
func withHostPort(dsn, hostport string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	u.Host = hostport
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// withDatabase rewrites the database of a postgres URL.
func withDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

// createDatabases creates every database concurrently over separate
// connections: CREATE DATABASE cannot run in a transaction block, and each
// one is a few checkpoints' worth of I/O that overlaps well.
func createDatabases(ctx context.Context, adminDSN string, names []string) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range names {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, adminDSN)
			if err != nil {
				return fmt.Errorf("create database %s: connect: %w", n, err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(gctx, "CREATE DATABASE "+pgx.Identifier{n}.Sanitize()+" TEMPLATE template0 STRATEGY FILE_COPY"); err != nil {
				return fmt.Errorf("create database %s: %w", n, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
