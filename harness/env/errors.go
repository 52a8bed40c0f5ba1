package env

import (
	"errors"
	"strings"
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
