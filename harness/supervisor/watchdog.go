package supervisor

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// watchdogScript keeps the set of live process groups it is told about on
// stdin ("+PGID" adds, "-PGID" removes) and, when stdin reaches EOF (the
// harness closed it, or died and the kernel closed it), SIGKILLs every group
// still in the set. It also keeps a set of Docker labels ("docker+ HOST
// LABEL", "docker- HOST LABEL"): at EOF it removes, with the docker CLI on
// HOST, every container (with its volumes) and every network carrying a
// label still in the set — the job testcontainers' Ryuk does, without an
// image to pull.
const watchdogScript = `set -f
live=" "
dock=" "
while read -r line; do
  case "$line" in
    +*) live="$live${line#+} " ;;
    -*) n=" "; for p in $live; do [ "$p" = "${line#-}" ] || n="$n$p "; done; live=$n ;;
    "docker+ "*) set -- ${line#docker+ }; dock="$dock$1|$2 " ;;
    "docker- "*) set -- ${line#docker- }; n=" "; for d in $dock; do [ "$d" = "$1|$2" ] || n="$n$d "; done; dock=$n ;;
  esac
done
for p in $live; do kill -s KILL -- "-$p" 2>/dev/null; done
for d in $dock; do
  h=${d%%|*}; l=${d#*|}
  ids=$(docker -H "$h" ps -aq --filter "label=$l" 2>/dev/null)
  [ -z "$ids" ] || docker -H "$h" rm -f -v $ids >/dev/null 2>&1
  nets=$(docker -H "$h" network ls -q --filter "label=$l" 2>/dev/null)
  [ -z "$nets" ] || docker -H "$h" network rm $nets >/dev/null 2>&1
done
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

// Reaper is a watchdog of its own for resources that are not processes of a
// Supervisor: Docker containers and networks, known by a label. While the
// harness lives it does nothing; when the harness exits or dies (SIGKILL
// included: the kernel closes the pipe), it removes every container and
// network carrying a label still registered, and kills every process group
// still registered. It needs the docker CLI on PATH for the Docker part.
type Reaper struct{ wd *watchdog }

// StartReaper starts the watchdog process.
func StartReaper() (*Reaper, error) {
	wd, err := startWatchdog()
	if err != nil {
		return nil, err
	}
	return &Reaper{wd: wd}, nil
}

// AddDockerLabel registers a label filter ("key=value") on the Docker
// engine at host (a DOCKER_HOST URL such as unix:///run/docker.sock).
func (r *Reaper) AddDockerLabel(host, label string) error {
	if err := dockerToken(host, label); err != nil {
		return err
	}
	return r.wd.send("docker+ " + host + " " + label)
}

// RemoveDockerLabel unregisters a label once what carries it is gone.
func (r *Reaper) RemoveDockerLabel(host, label string) error {
	if err := dockerToken(host, label); err != nil {
		return err
	}
	return r.wd.send("docker- " + host + " " + label)
}

// Stop closes the watchdog's stdin: it removes whatever is still registered
// (normally nothing) and exits; Stop waits for that.
func (r *Reaper) Stop() error { return r.wd.stop() }

// Pid is the watchdog's process id (tests kill it or look for it).
func (r *Reaper) Pid() int { return r.wd.cmd.Process.Pid }

func dockerToken(host, label string) error {
	for _, s := range []string{host, label} {
		if s == "" || strings.ContainsAny(s, " \t\n|") {
			return fmt.Errorf("reaper: %q cannot be passed to the watchdog (empty, or contains a space or |)", s)
		}
	}
	return nil
}
