package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Spec says how to start one process.
type Spec struct {
	// Name is the instance name, e.g. "relay-2"; it names the log file.
	Name    string
	Command []string
	// Env is the extra environment (KEY=VALUE), appended to a minimal base
	// (PATH, HOME, TMPDIR from the harness): nothing else of the harness's
	// environment leaks into a target.
	Env []string
	// Dir is the working directory ("" = the harness's).
	Dir string
	// LogDir receives LogDir/<Name>.log (stdout and stderr, appended across
	// restarts). "" discards the output.
	LogDir string
	// HealthURL, when set, is polled by WaitHealthy until it answers 2xx.
	HealthURL string
	// Credential, when set, runs the process as another user (PostgreSQL
	// refuses to run as root). Pdeathsig still applies: Go sets it after
	// changing credentials.
	Credential *syscall.Credential
}

func (s Spec) validate() error {
	if s.Name == "" {
		return errors.New("supervisor: spec without a name")
	}
	if strings.ContainsAny(s.Name, "/\x00") {
		return fmt.Errorf("supervisor: spec name %q contains '/' (it names a log file)", s.Name)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fmt.Errorf("supervisor: %s: empty command", s.Name)
	}
	return nil
}

// LogPath is where the process's output goes ("" when LogDir is empty).
func (s Spec) LogPath() string {
	if s.LogDir == "" {
		return ""
	}
	return filepath.Join(s.LogDir, s.Name+".log")
}

// Proc is one supervised process across its incarnations (restarts).
type Proc struct {
	sup  *Supervisor
	spec Spec

	mu       sync.Mutex
	starts   int
	pid      int
	running  bool // started and not yet reaped; signals are sent only then
	exited   chan struct{}
	status   string
	logStart int64 // offset of this incarnation's marker line in the log
}

// Name is the instance name.
func (p *Proc) Name() string { return p.spec.Name }

// Spec returns the spec the process was started with.
func (p *Proc) Spec() Spec { return p.spec }

// Starts counts the incarnations so far (1 after Start, 2 after a Restart…).
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Pid is the pid of the current (or last) incarnation; it is also its
// process group id.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Alive reports whether the current incarnation has not exited yet.
func (p *Proc) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// Exited is closed when the current incarnation exits. Take it again after
// a Restart.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ExitStatus describes how the last incarnation ended ("exit status 1",
// "signal: killed"), or "running".
func (p *Proc) ExitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return "running"
	}
	return p.status
}

// Kill SIGKILLs the whole process group and waits until the process has
// exited. Killing a process that already exited is a no-op.
func (p *Proc) Kill() error {
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return nil
	}
	err := signalGroup(p.pid, syscall.SIGKILL)
	exited := p.exited
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s (pgid %d): %w", p.spec.Name, p.pid, err)
	}
	<-exited
	return nil
}

// Pause SIGSTOPs the whole process group (a GC pause, an expired lease).
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP, "pause") }

// Resume SIGCONTs the whole process group.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT, "resume") }

func (p *Proc) signal(sig syscall.Signal, verb string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return fmt.Errorf("%s %s: not running (%s)", verb, p.spec.Name, p.status)
	}
	if err := signalGroup(p.pid, sig); err != nil {
		return fmt.Errorf("%s %s (pgid %d): %w", verb, p.spec.Name, p.pid, err)
	}
	return nil
}

// Restart starts a new incarnation with the same spec, after a Kill or after
// the process died by itself. It fails if the process is still running.
func (p *Proc) Restart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restart %s: %w", p.spec.Name, err)
	}
	if p.Alive() {
		return fmt.Errorf("restart %s: still running (pid %d); Kill it first", p.spec.Name, p.Pid())
	}
	return p.launch()
}

// signalGroup signals process group pgid; a group that is already gone
// is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// baseEnv is the minimal environment every process starts from.
func baseEnv() []string {
	get := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	return []string{
		"PATH=" + get("PATH", "/usr/local/bin:/usr/bin:/bin"),
		"HOME=" + get("HOME", "/"),
		"TMPDIR=" + os.TempDir(),
	}
}

// launch starts one incarnation.
func (p *Proc) launch() error {
	name := p.spec.Name
	wd, err := p.sup.watchdogFor()
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}

	var out *os.File
	var logStart int64
	if path := p.spec.LogPath(); path != "" {
		if err := os.MkdirAll(p.spec.LogDir, 0o755); err != nil {
			return fmt.Errorf("start %s: log dir: %w", name, err)
		}
		out, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("start %s: open log: %w", name, err)
		}
		defer out.Close() // the child has its own copy
		if st, err := out.Stat(); err == nil {
			logStart = st.Size()
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return fmt.Errorf("start %s: already running (pid %d)", name, p.pid)
	}
	n := p.starts + 1
	if out != nil {
		fmt.Fprintf(out, "=== sagachaos: start #%d at %s: %s ===\n", n, time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.spec.Command, " "))
	}
	cmd := exec.Command(p.spec.Command[0], p.spec.Command[1:]...)
	cmd.Env = append(baseEnv(), p.spec.Env...)
	cmd.Dir = p.spec.Dir
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.spec.Credential}
	onSpawnerThread(func() { err = cmd.Start() })
	if err != nil {
		if out != nil {
			fmt.Fprintf(out, "=== sagachaos: start #%d failed: %v ===\n", n, err)
		}
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	if err := wd.add(pid); err != nil {
		p.sup.log.Warn("watchdog does not know the new process; it dies with the harness only through Pdeathsig", "proc", name, "err", err)
	}
	p.starts, p.pid, p.running, p.status, p.logStart = n, pid, true, "", logStart
	exited := make(chan struct{})
	p.exited = exited
	p.sup.log.Info("process started", "proc", name, "pid", pid, "start", n)
	go p.wait(cmd, wd, exited)
	return nil
}

// wait reaps one incarnation. It first waits without reaping (WNOWAIT), so
// that the pid, which is the group id, cannot be reused while it kills
// what is left of the group.
func (p *Proc) wait(cmd *exec.Cmd, wd *watchdog, exited chan struct{}) {
	pid := cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil || !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	p.mu.Lock()
	p.running = false // no more signals to this pgid from Kill/Pause/Resume
	p.status = "exiting"
	p.mu.Unlock()
	signalGroup(pid, syscall.SIGKILL) // leftovers of a crashed leader
	werr := cmd.Wait()
	status := "exited"
	if cmd.ProcessState != nil {
		status = cmd.ProcessState.String()
	} else if werr != nil {
		status = werr.Error()
	}
	wd.remove(pid)
	p.mu.Lock()
	p.status = status
	close(exited)
	p.mu.Unlock()
	p.sup.log.Info("process exited", "proc", p.spec.Name, "pid", pid, "status", status)
}

// WaitHealthy polls the process's HealthURL until it answers 2xx. It fails
// at once, with the last lines of the log, if the process exits first, and
// after deadline otherwise, with one line of bounded length: the last real
// answer (a status and the first line of its body, or why the connection
// failed — never the deadline that cut the last probe short), where the log
// is and its last line. A spec without HealthURL is healthy while alive.
func (s *Supervisor) WaitHealthy(ctx context.Context, p *Proc, deadline time.Duration) error {
	exited := p.Exited()
	if p.spec.HealthURL == "" {
		select {
		case <-exited:
			return p.exitedError("before it was healthy")
		default:
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	const probeTimeout = time.Second
	client := &http.Client{Timeout: probeTimeout}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.spec.HealthURL, nil)
		if err != nil {
			return fmt.Errorf("%s: health url %q: %w", p.spec.Name, p.spec.HealthURL, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = resp.Status
			if line := firstLine(body); line != "" {
				last += ": " + line
			}
		} else if ctx.Err() == nil {
			// A probe the deadline cut short answered nothing: keep the
			// answer before it.
			last = probeError(err, probeTimeout)
		}
		select {
		case <-exited:
			return p.exitedError("before it was healthy")
		case <-ctx.Done():
			select {
			case <-exited:
				return p.exitedError("before it was healthy")
			default:
			}
			msg := fmt.Sprintf("%s not healthy after %v: last answer %s (GET %s)", p.spec.Name, deadline, clip(last, 200), p.spec.HealthURL)
			if path := p.spec.LogPath(); path != "" {
				msg += "; log " + path
				if line := firstLine([]byte(p.LastLogLines(1))); line != "" {
					msg += ", last line: " + clip(line, 160)
				}
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}

// probeError is what a failed probe says: the cause without net/http's
// `Get "url": ` prefix (the URL is in the message once).
func probeError(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("none within %v", timeout)
		}
		err = ue.Err
	}
	return oneLine(err.Error())
}

// firstLine is the first non-blank line of b, trimmed.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return oneLine(l)
		}
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip bounds s to n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (p *Proc) exitedError(when string) error {
	st := p.ExitStatus()
	how := "exited with " + st
	if strings.HasPrefix(st, "exit status ") {
		how = "exited with status " + strings.TrimPrefix(st, "exit status ")
	} else if strings.HasPrefix(st, "signal: ") {
		how = "was killed by signal " + strings.TrimPrefix(st, "signal: ")
	}
	return fmt.Errorf("%s %s %s; last log lines:\n%s", p.spec.Name, how, when, p.LastLogLines(20))
}

// LastLogLines returns up to n last lines the current incarnation wrote to
// its log (after its start marker).
func (p *Proc) LastLogLines(n int) string {
	path := p.spec.LogPath()
	if path == "" {
		return "(no log: LogDir not set)"
	}
	p.mu.Lock()
	off := p.logStart
	p.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer f.Close()
	const max = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	if st.Size()-off > max {
		off = st.Size() - max
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}
