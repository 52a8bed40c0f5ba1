package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/targets"
)

// refused is the run's error when the server refused the target something
// for want of a setting its manifest does not declare (env.Refusals: the
// embedded cluster's log says so). Such a run says nothing about the
// target, so it must not go on to a verdict: a CDC relay whose slot could
// not be created leaves every saga stuck and the run INVALID, for want of
// wal_level=logical in the manifest. It is bad input (exit code 2), naming
// the settings. A setting the manifest declares was applied; a limit the
// target then exceeds (more WAL senders than it declared) is its own
// behaviour, judged by the run. cause, if not nil, is the error the stage
// failed with.
func refused(e *env.Env, m *targets.Manifest, cause error) error {
	var rs []env.Refusal
	for _, r := range e.Refusals() {
		if m.PostgresSetting(r.Name) == "" {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return cause
	}
	var parts []string
	for _, r := range rs {
		times := ""
		if r.Count > 1 {
			times = fmt.Sprintf(", %d times", r.Count)
		}
		parts = append(parts, fmt.Sprintf("%s (postgres.log%s: %q)", r.Setting, times, strings.Join(strings.Fields(r.Line), " ")))
	}
	msg := "postgres refused the target for want of a setting its manifest does not declare: " + strings.Join(parts, "; ") +
		`: declare what it needs in the manifest's postgres.settings, e.g. "postgres": {"settings": {"wal_level": "logical"}}`
	if cause != nil {
		c := strings.Join(strings.Fields(cause.Error()), " ")
		if len(c) > 160 {
			c = c[:160] + "…"
		}
		msg += " (the stage failed with: " + c + ")"
	}
	return &InputError{Err: errRefused{msg}}
}

type errRefused struct{ msg string }

func (e errRefused) Error() string { return e.msg }

// watchRefusals ends the run as soon as the server logs a refusal: it
// returns a context that is cancelled then, with the refusal as its cause
// (refusalCause), so a target whose relay reports healthy while its slots
// cannot be created fails within a fraction of a second of the first
// attempt, not after the quiesce deadline. stop ends the watch.
func watchRefusals(ctx context.Context, e *env.Env, m *targets.Manifest) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := refused(e, m, nil); err != nil {
					cancel(err)
					return
				}
			}
		}
	})
	var once sync.Once
	return ctx, func() { once.Do(func() { close(done); wg.Wait() }) }
}

// refusalCause is the refusal that ended the run early (nil if none).
func refusalCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	var r errRefused
	if c := context.Cause(ctx); errors.As(c, &r) {
		return c
	}
	return nil
}
