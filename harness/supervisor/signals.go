package supervisor

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// AbortWait bounds how long the abort hooks may run after a second signal
// before the process exits anyway.
const AbortWait = 2 * time.Second

// InterruptedError is the cause of the context NotifyContext returns when a
// signal arrived.
type InterruptedError struct{ Signal os.Signal }

func (e *InterruptedError) Error() string { return "interrupted by signal: " + e.Signal.String() }

// NotifyContext is the harness's one signal mechanism. The first SIGINT or
// SIGTERM cancels the returned context with an *InterruptedError cause: the
// run stops, undoes its faults (each undo gives up a couple of seconds
// after the interrupt), kills every process and writes a run directory
// that says it was interrupted. A second signal ends the harness at once:
// it runs the abort hooks (OnAbort) for at most AbortWait, then exits with
// 130 for SIGINT, 143 for SIGTERM. What the hooks do not reach, Pdeathsig
// and the watchdog do. stop releases the handler, like
// signal.NotifyContext's.
func NotifyContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
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
			cancel(&InterruptedError{Signal: sig})
		case <-done:
			return
		}
		select {
		case sig := <-ch:
			aborting.Store(true)
			Abort(AbortWait)
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return ctx, stop
}

// aborting is set once a second signal is ending the harness at once.
var aborting atomic.Bool

// Exit ends the process with code, unless a second signal is already
// ending it at once: then the abort's own exit (130 or 143, within
// AbortWait) wins. The ordinary path out of a run the first signal stopped
// can finish before the abort hooks do; without this it would exit with
// the run's code instead of the signal's.
func Exit(code int) {
	if aborting.Load() {
		time.Sleep(AbortWait + time.Second)
	}
	os.Exit(code)
}

var aborts = struct {
	sync.Mutex
	next  int
	hooks map[int]func()
}{hooks: map[int]func(){}}

// OnAbort registers f to run when the harness is ended at once (a second
// Ctrl-C). Register what must not outlive the harness — kill the target's
// processes, stop the embedded PostgreSQL and remove its data — and call
// the returned function once it is cleaned up the ordinary way.
func OnAbort(f func()) (unregister func()) {
	aborts.Lock()
	defer aborts.Unlock()
	id := aborts.next
	aborts.next++
	aborts.hooks[id] = f
	return func() {
		aborts.Lock()
		delete(aborts.hooks, id)
		aborts.Unlock()
	}
}

// Abort runs every registered hook concurrently and waits for them, at
// most d.
func Abort(d time.Duration) {
	aborts.Lock()
	hooks := make([]func(), 0, len(aborts.hooks))
	for _, f := range aborts.hooks {
		hooks = append(hooks, f)
	}
	aborts.Unlock()
	var wg sync.WaitGroup
	for _, f := range hooks {
		wg.Go(f)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(d):
	}
}
