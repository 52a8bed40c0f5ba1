// Package svc holds what every reference process shares: configuration
// from env, a PostgreSQL pool and Kafka client tuned to recover fast after
// a link cut, schema application, and the /healthz server.
package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConfigError is a bad or missing setting; main turns it into exit code 2.
type ConfigError struct{ Msg string }

// Error returns the one-line message printed before exit 2.
func (e *ConfigError) Error() string { return e.Msg }

// Env reads a required env variable.
func Env(name string) (string, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return "", &ConfigError{Msg: name + " is not set"}
	}
	return v, nil
}

// EnvDuration reads an optional duration env variable.
func EnvDuration(name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, &ConfigError{Msg: fmt.Sprintf("%s=%q: want a positive duration like 5s", name, v)}
	}
	return d, nil
}

// EnvInt reads an optional positive integer env variable.
func EnvInt(name string, def int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, &ConfigError{Msg: fmt.Sprintf("%s=%q: want a positive integer", name, v)}
	}
	return n, nil
}

// Pool opens a pgx pool with short health checks, so a cut link or a
// restarted server is noticed within a fraction of a second.
func Pool(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("bad database URL: %v", err)}
	}
	cfg.MaxConns = maxConns
	cfg.HealthCheckPeriod = 500 * time.Millisecond
	cfg.MaxConnIdleTime = 30 * time.Second
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return p, nil
}

// Migrate applies schema under an advisory lock, retrying while the
// database is unreachable (a process may start during a link cut).
func Migrate(ctx context.Context, p *pgxpool.Pool, schema string) error {
	var last error
	for attempt := 0; attempt < 100; attempt++ {
		last = func() error {
			// One attempt may not outlive a blackholed link: the loop
			// retries with a fresh connection instead.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(7700417)`); err != nil {
				return err
			}
			defer func() {
				// Bounded too; a session lock we cannot release dies
				// with its connection, so the pool must not keep it.
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				defer cancel()
				if _, err := c.Exec(uctx, `SELECT pg_advisory_unlock(7700417)`); err != nil {
					c.Conn().Close(uctx)
				}
			}()
			_, err = c.Exec(ctx, schema)
			return err
		}()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("apply schema: %w", last)
}

// KafkaOpts are the client options every process uses: fast metadata
// refresh and short retry backoff, so a restored link is used within ~50ms.
func KafkaOpts(brokers string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(2 * time.Second),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.ConnIdleTimeout(30 * time.Second),
	}
}

// Listen binds addr before the process does anything else, so a second
// incarnation started while the first still runs fails at once (exit 2)
// instead of working beside it.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("listen on LISTEN_ADDR %s: %v", addr, err)}
	}
	return ln, nil
}

// Serve runs the HTTP server on ln until ctx ends. /healthz answers 200
// once the caller's ready func says so.
func Serve(ctx context.Context, ln net.Listener, mux *http.ServeMux, ready func() bool) error {
	if mux == nil {
		mux = http.NewServeMux()
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}

// Backoff sleeps before retry attempt n, or returns early when ctx ends.
// The cap is short (250ms): every retried operation here is cheap and
// idempotent, and a restored link or restarted database should be used
// within a fraction of a second.
func Backoff(ctx context.Context, n int) {
	d := time.Duration(n+1) * 50 * time.Millisecond
	if d > 250*time.Millisecond {
		d = 250 * time.Millisecond
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Instance is this process's instance name (SAGACHAOS_INSTANCE, unique per
// running instance of a component), or "" when the harness did not set it.
func Instance() string { return strings.TrimSpace(os.Getenv("SAGACHAOS_INSTANCE")) }

// Logger returns the process logger (JSON on stderr) tagged with the
// instance name.
func Logger(component string) *slog.Logger {
	inst := Instance()
	if inst == "" {
		inst = component
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("instance", inst)
}
