package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Supervisor owns a set of target processes.
type Supervisor struct {
	log *slog.Logger

	mu     sync.Mutex
	procs  []*Proc
	byName map[string]*Proc
	wd     *watchdog
}

// New returns a supervisor that logs process starts and exits to logger
// (nil: slog.Default()).
func New(logger *slog.Logger) *Supervisor {
	if logger == nil {
		logger = slog.Default()
	}
	return &Supervisor{log: logger, byName: map[string]*Proc{}}
}

// Start starts spec as a new process. Its lifetime is not tied to ctx (ctx
// only aborts the start); it runs until Kill, KillAll or its own exit. A name
// may be reused once the earlier process with that name has exited.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Proc, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	s.mu.Lock()
	if old, ok := s.byName[spec.Name]; ok && old.Alive() {
		s.mu.Unlock()
		return nil, fmt.Errorf("start %s: a process with this name is already running (pid %d)", spec.Name, old.Pid())
	}
	p := &Proc{sup: s, spec: spec}
	s.byName[spec.Name] = p
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	if err := p.launch(); err != nil {
		s.mu.Lock()
		if s.byName[spec.Name] == p {
			delete(s.byName, spec.Name)
		}
		for i, q := range s.procs {
			if q == p {
				s.procs = append(s.procs[:i], s.procs[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// Procs returns every process started so far (alive or not), in start order.
func (s *Supervisor) Procs() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Proc(nil), s.procs...)
}

// Proc returns the latest process started under name, or nil.
func (s *Supervisor) Proc(name string) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byName[name]
}

// KillAll SIGKILLs every live process group, waits for each to exit, and
// stops the watchdog. It is idempotent, and the supervisor can start
// processes again afterwards.
func (s *Supervisor) KillAll() error {
	var errs []error
	for _, p := range s.Procs() {
		if err := p.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	wd := s.wd
	s.wd = nil
	s.mu.Unlock()
	if wd != nil {
		if err := wd.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Guard is meant to be deferred right after New, in the goroutine that runs
// the harness:
//
//	sup := supervisor.New(log)
//	defer sup.KillAll()
//	defer sup.Guard()
//
// On a panic it kills every process and panics again with the same value, so
// the crash is still reported. Without a panic it does nothing. (A panic in
// another goroutine ends the process without running defers; the watchdog
// and Pdeathsig cover that case.)
func (s *Supervisor) Guard() {
	if r := recover(); r != nil {
		s.log.Error("panic: killing all target processes", "panic", r)
		s.KillAll()
		panic(r)
	}
}

// InterruptedError is the cause of the context InstallSignalHandlers returns
// when a signal arrived.
type InterruptedError struct{ Signal os.Signal }

func (e *InterruptedError) Error() string { return "interrupted by signal: " + e.Signal.String() }

// InstallSignalHandlers catches SIGINT and SIGTERM: on the first one it kills
// every process (KillAll), then cancels the returned context with an
// *InterruptedError cause (context.Cause), so the caller can record the
// interruption and write its report. After the first signal the default
// behaviour is restored: a second Ctrl-C ends the harness at once (the
// watchdog still cleans up). stop releases the handler and cancels the
// context, like signal.NotifyContext.
func (s *Supervisor) InstallSignalHandlers(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
		cancel(context.Canceled)
	}
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			s.log.Warn("signal: killing all target processes", "signal", sig.String())
			if err := s.KillAll(); err != nil {
				s.log.Error("kill all after signal", "err", err)
			}
			cancel(&InterruptedError{Signal: sig})
		case <-done:
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, stop
}

// watchdogFor returns the running watchdog, starting one if needed.
func (s *Supervisor) watchdogFor() (*watchdog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wd != nil && s.wd.alive() {
		return s.wd, nil
	}
	wd, err := startWatchdog()
	if err != nil {
		return nil, err
	}
	s.wd = wd
	return wd, nil
}
