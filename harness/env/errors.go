package env

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnsupported is returned by operations the selected provider cannot do,
// such as crashing a PostgreSQL server the harness does not own.
var ErrUnsupported = errors.New("env: operation not supported by this provider")

// ErrUnavailable marks bad input or a missing part of the environment
// (unreachable DSN, no PostgreSQL binaries, no Docker). The CLI maps it to
// exit code 2: it is never a verdict about the target.
var ErrUnavailable = errors.New("env: environment unavailable")

// UnavailableError says, on one line, what is missing and how to fix it.
type UnavailableError struct {
	What string // e.g. "postgres: local binaries not found"
	Fix  string // e.g. "install postgresql-15 or pass --postgres dsn"
	Err  error  // underlying cause, may be nil
}

// Error is a single line: what, cause, fix.
func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString(e.What)
	if e.Err != nil {
		b.WriteString(" (")
		b.WriteString(e.Err.Error())
		b.WriteString(")")
	}
	if e.Fix != "" {
		b.WriteString(": ")
		b.WriteString(e.Fix)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Unwrap exposes the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true for every UnavailableError.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func unavailable(what, fix string, err error) error {
	return &UnavailableError{What: what, Fix: fix, Err: err}
}

// connectCause is what a message says about a failed connection: pgx wraps
// one error per attempt (each address, TLS then plaintext under the default
// sslmode=prefer) behind "failed to connect to `user=… database=…`", so the
// same dial error came out twice. It keeps each distinct cause once, without
// pgx's prefixes; errors.Is and errors.As still see the original.
func connectCause(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	inner := errors.Unwrap(ce)
	if inner == nil {
		return err
	}
	var parts []error
	if j, ok := inner.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{inner}
	}
	var msgs []string
	seen := map[string]bool{}
	for _, p := range parts {
		// Each attempt is "host:port (name): what: cause". Drop the address
		// prefix; drop "what" too when the cause is a network error, which
		// says what it was doing and to whom ("dial tcp 127.0.0.1:1: …"). A
		// retry dials from another local port: name only the server.
		cause := p
		if u := errors.Unwrap(cause); u != nil {
			cause = u
		}
		m := cause.Error()
		var op *net.OpError
		if errors.As(cause, &op) {
			m = op.Error()
			if op.Addr != nil {
				m = fmt.Sprintf("%s %s %s: %v", op.Op, op.Net, op.Addr, op.Err)
			}
		}
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	return &causeError{msg: strings.Join(msgs, "; "), err: err}
}

type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }
