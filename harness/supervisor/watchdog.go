package supervisor

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// watchdogScript keeps the set of live process groups it is told about on
// stdin ("+PGID" adds, "-PGID" removes) and, when stdin reaches EOF (the
// harness closed it, or died and the kernel closed it), SIGKILLs every group
// still in the set.
const watchdogScript = `set -f
live=" "
while read -r line; do
  case "$line" in
    +*) live="$live${line#+} " ;;
    -*) n=" "; for p in $live; do [ "$p" = "${line#-}" ] || n="$n$p "; done; live=$n ;;
  esac
done
for p in $live; do kill -s KILL -- "-$p" 2>/dev/null; done
exit 0
`

// watchdog is the out-of-process reaper described in the package doc.
type watchdog struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	w    io.WriteCloser
	dead chan struct{}
	err  error
}

func startWatchdog() (*watchdog, error) {
	// $0 names it in ps: "sagachaos-watchdog".
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "sagachaos-watchdog")
	cmd.Env = baseEnv()
	// Its own group: a terminal's Ctrl-C (sent to the foreground group)
	// must not take it down before the harness has cleaned up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: stdin pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("watchdog: start /bin/sh (needed to reap grandchildren if the harness dies): %w", err)
	}
	wd := &watchdog{cmd: cmd, w: w, dead: make(chan struct{})}
	go func() {
		wd.err = cmd.Wait()
		close(wd.dead)
	}()
	return wd, nil
}

func (wd *watchdog) alive() bool {
	select {
	case <-wd.dead:
		return false
	default:
		return true
	}
}

func (wd *watchdog) send(line string) error {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if _, err := io.WriteString(wd.w, line+"\n"); err != nil {
		return fmt.Errorf("watchdog: tell %q: %w", line, err)
	}
	return nil
}

func (wd *watchdog) add(pgid int) error    { return wd.send(fmt.Sprintf("+%d", pgid)) }
func (wd *watchdog) remove(pgid int) error { return wd.send(fmt.Sprintf("-%d", pgid)) }

// stop closes the watchdog's stdin (it then kills whatever it still knows,
// normally nothing) and waits for it.
func (wd *watchdog) stop() error {
	wd.mu.Lock()
	err := wd.w.Close()
	wd.mu.Unlock()
	<-wd.dead
	if err != nil {
		return fmt.Errorf("watchdog: close: %w", err)
	}
	if wd.err != nil {
		return fmt.Errorf("watchdog: %w", wd.err)
	}
	return nil
}

// spawner runs cmd.Start on one OS thread that stays locked for the life of
// the process. Pdeathsig is delivered when the thread that forked the child
// exits; Go may retire idle threads, so children must be forked from a
// thread that never goes away.
var spawner = struct {
	once sync.Once
	ch   chan func()
}{ch: make(chan func())}

func onSpawnerThread(f func()) {
	spawner.once.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for fn := range spawner.ch {
				fn()
			}
		}()
	})
	done := make(chan struct{})
	spawner.ch <- func() { f(); close(done) }
	<-done
}
