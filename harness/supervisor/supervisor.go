package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
