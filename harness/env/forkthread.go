package env

import (
	"runtime"
	"sync"
)

// Pdeathsig fires when the *thread* that forked the child exits, not the
// process. Go destroys a thread when a goroutine that locked it exits
// without unlocking, so a postmaster forked from an arbitrary goroutine could
// be SIGKILLed in the middle of a run by unrelated code. Every fork that sets
// Pdeathsig therefore happens on one thread locked for the life of the
// process.
var (
	forkOnce sync.Once
	forkCh   chan func()
)

func onForkThread(fn func()) {
	forkOnce.Do(func() {
		forkCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as we do
			for f := range forkCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forkCh <- func() { defer close(done); fn() }
	<-done
}
