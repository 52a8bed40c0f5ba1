package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// patience bounds every wait on the OS in these tests. It is a guard
// against hangs, not an assertion about speed.
const patience = 30 * time.Second

func newSup(t *testing.T) *Supervisor {
	t.Helper()
	sup := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		if err := sup.KillAll(); err != nil {
			t.Errorf("KillAll: %v", err)
		}
	})
	return sup
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// procState is the state letter of /proc/<pid>/stat ("" if there is no
// such process).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// gone reports whether pid no longer runs. A zombie counts as gone: it
// holds no port and runs no code; only its parent (or init) can reap it.
func gone(pid int) bool {
	st := procState(pid)
	return st == "" || st == "Z" || st == "X"
}

// reapOrphans reaps dead processes the test binary inherited as subreaper
// (see TestMain), so that tests leave no zombies; a pid that is not our
// child is ignored (ECHILD).
func reapOrphans(pids ...int) {
	for _, pid := range pids {
		if gone(pid) {
			unix.Wait4(pid, nil, unix.WNOHANG, nil)
		}
	}
}

// eventually polls cond until it holds or patience runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after %v: %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func readLog(t *testing.T, p *Proc) string {
	t.Helper()
	b, err := os.ReadFile(p.Spec().LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Start, health, pause/resume, kill and restart of one real process.
func TestLifecycle(t *testing.T) {
	sup := newSup(t)
	port := freePort(t)
	spec := Spec{
		Name:      "api",
		Command:   []string{self(t)},
		Env:       []string{helperEnv + "=serve", fmt.Sprintf("LISTEN=127.0.0.1:%d", port)},
		LogDir:    t.TempDir(),
		HealthURL: fmt.Sprintf("http://127.0.0.1:%d/health", port),
	}
	ctx := context.Background()
	p, err := sup.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.WaitHealthy(ctx, p, patience); err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	if !p.Alive() || p.ExitStatus() != "running" || pid <= 0 {
		t.Fatalf("alive=%v status=%q pid=%d", p.Alive(), p.ExitStatus(), pid)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("pgid %d (%v), want its own group %d", pgid, err, pid)
	}

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "process stopped (state T)", func() bool { return procState(pid) == "T" })
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "process running again", func() bool { return procState(pid) != "T" })
	if err := sup.WaitHealthy(ctx, p, patience); err != nil {
		t.Fatalf("after resume: %v", err)
	}

	exited := p.Exited()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	default:
		t.Fatal("Kill returned before the process exited")
	}
	if p.Alive() || p.ExitStatus() != "signal: killed" {
		t.Fatalf("after kill: alive=%v status=%q", p.Alive(), p.ExitStatus())
	}
	if err := p.Pause(); err == nil {
		t.Fatal("Pause of a dead process succeeded")
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}

	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sup.WaitHealthy(ctx, p, patience); err != nil {
		t.Fatal(err)
	}
	if p.Pid() == pid || p.Starts() != 2 {
		t.Fatalf("restart: pid %d (was %d), starts %d", p.Pid(), pid, p.Starts())
	}
	if err := p.Restart(ctx); err == nil {
		t.Fatal("Restart of a running process succeeded")
	}
	if _, err := sup.Start(ctx, spec); err == nil {
		t.Fatal("a second live process with the same name was started")
	}
	if err := sup.KillAll(); err != nil {
		t.Fatal(err)
	}
	if err := sup.KillAll(); err != nil {
		t.Fatalf("second KillAll: %v", err)
	}
	if portOpen(port) {
		t.Fatalf("port %d still open after KillAll", port)
	}

	log := readLog(t, p)
	for _, want := range []string{"=== sagachaos: start #1 at ", "=== sagachaos: start #2 at ", "serving on 127.0.0.1:" + strconv.Itoa(port)} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Count(log, "serving on") != 2 || strings.Index(log, "start #1") > strings.Index(log, "start #2") {
		t.Fatalf("log is not one block per start, in order:\n%s", log)
	}
}

func TestExitBeforeHealthy(t *testing.T) {
	sup := newSup(t)
	ctx := context.Background()
	p, err := sup.Start(ctx, Spec{
		Name:      "relay-1",
		Command:   []string{"sh", "-c", "echo starting; echo 'config: DATABASE_URL is not set' >&2; exit 1"},
		LogDir:    t.TempDir(),
		HealthURL: fmt.Sprintf("http://127.0.0.1:%d/health", freePort(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = sup.WaitHealthy(ctx, p, patience)
	if err == nil {
		t.Fatal("WaitHealthy succeeded for a process that exited")
	}
	for _, want := range []string{"relay-1 exited with status 1 before it was healthy", "last log lines", "DATABASE_URL is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
}

func TestNotHealthyInTime(t *testing.T) {
	sup := newSup(t)
	p, err := sup.Start(context.Background(), Spec{
		Name: "mute", Command: []string{"sleep", "1000"}, LogDir: t.TempDir(),
		HealthURL: fmt.Sprintf("http://127.0.0.1:%d/health", freePort(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = sup.WaitHealthy(context.Background(), p, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "mute not healthy after 200ms") {
		t.Fatalf("err = %v, want a not-healthy error", err)
	}
	if !p.Alive() {
		t.Fatal("WaitHealthy must not kill the process (the caller decides)")
	}
}

// A crash is reported, not restarted, and what the crashed leader left in
// its group is killed (so a restart finds its ports free).
func TestCrashIsReportedAndLeftoversKilled(t *testing.T) {
	sup := newSup(t)
	dir := t.TempDir()
	p, err := sup.Start(context.Background(), Spec{
		Name:    "crashy",
		Command: []string{"sh", "-c", `sleep 1000 & echo $! > "$D/child.pid"; exit 3`},
		Env:     []string{"D=" + dir},
		LogDir:  dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(patience):
		t.Fatal("crashy did not exit")
	}
	if p.ExitStatus() != "exit status 3" || p.Alive() || p.Starts() != 1 {
		t.Fatalf("status %q alive %v starts %d", p.ExitStatus(), p.Alive(), p.Starts())
	}
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	eventually(t, "the crashed process's background child is killed", func() bool { return gone(child) })
	reapOrphans(child)
	if p.Starts() != 1 || p.Alive() {
		t.Fatal("a crashed process was restarted")
	}
}

// Kill reaches the whole group, not only the leader.
func TestKillTakesTheGroup(t *testing.T) {
	sup := newSup(t)
	dir := t.TempDir()
	p, err := sup.Start(context.Background(), Spec{
		Name:    "parent",
		Command: []string{"sh", "-c", `sleep 1000 & echo $! > "$D/child.pid"; wait`},
		Env:     []string{"D=" + dir},
		LogDir:  dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	var child int
	eventually(t, "child pid written", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "grandchild killed with its group", func() bool { return gone(child) })
	reapOrphans(child)
}

// Only the base env and Spec.Env reach the process.
func TestEnvIsMinimal(t *testing.T) {
	t.Setenv("SAGACHAOS_LEAK_CHECK", "leaked")
	sup := newSup(t)
	p, err := sup.Start(context.Background(), Spec{
		Name:    "env",
		Command: []string{"sh", "-c", `echo "leak=[$SAGACHAOS_LEAK_CHECK] mine=[$MINE] home=[$HOME] dir=[$(pwd)]"`},
		Env:     []string{"MINE=yes"},
		Dir:     "/",
		LogDir:  t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if log := readLog(t, p); !strings.Contains(log, "leak=[] mine=[yes] home=[") || !strings.Contains(log, "dir=[/]") || strings.Contains(log, "home=[]") {
		t.Fatalf("env not as specified:\n%s", log)
	}
}

func TestSpecValidation(t *testing.T) {
	sup := newSup(t)
	cases := []Spec{
		{Command: []string{"true"}},
		{Name: "a/b", Command: []string{"true"}},
		{Name: "x"},
	}
	for _, c := range cases {
		if _, err := sup.Start(context.Background(), c); err == nil {
			t.Errorf("Start(%+v) succeeded", c)
		}
	}
	if _, err := sup.Start(context.Background(), Spec{Name: "nope", Command: []string{"/nonexistent/binary"}}); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
	if n := len(sup.Procs()); n != 0 {
		t.Errorf("%d procs listed after failed starts, want 0", n)
	}
}

// startHelperHarness runs the test binary as a harness that supervises
// three children (one of which forks a grandchild) and returns its report.
func startHelperHarness(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader, harnessReport) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(self(t))
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "WORK_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("helper harness: %v (stdout so far %q)", err, line)
	}
	var rep harnessReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("helper harness report %q: %v", line, err)
	}
	if len(rep.Children) != 3 || rep.Grandchild <= 0 || len(rep.Ports) != 2 {
		t.Fatalf("helper report %+v", rep)
	}
	for _, pid := range append(rep.Children, rep.Grandchild) {
		if gone(pid) {
			t.Fatalf("pid %d not running before the harness dies", pid)
		}
	}
	for _, port := range rep.Ports {
		eventually(t, fmt.Sprintf("port %d open", port), func() bool { return portOpen(port) })
	}
	return cmd, br, rep
}

func assertAllGone(t *testing.T, rep harnessReport) {
	t.Helper()
	for _, pid := range rep.Children {
		eventually(t, fmt.Sprintf("child %d gone", pid), func() bool { return gone(pid) })
	}
	eventually(t, fmt.Sprintf("grandchild %d gone", rep.Grandchild), func() bool { return gone(rep.Grandchild) })
	for _, port := range rep.Ports {
		eventually(t, fmt.Sprintf("port %d closed", port), func() bool { return !portOpen(port) })
	}
}

// The harness is SIGKILLed: no defer runs, yet its children (Pdeathsig) and
// their grandchild (the watchdog kills the group) must die, and their ports
// close.
func TestHarnessSIGKILLTakesEveryoneWithIt(t *testing.T) {
	cmd, _, rep := startHelperHarness(t, "harness")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	assertAllGone(t, rep)
	// The watchdog exits once it has killed the groups.
	eventually(t, fmt.Sprintf("watchdog %d exited", rep.Watchdog), func() bool { return gone(rep.Watchdog) })
	reapOrphans(append([]int{rep.Watchdog, rep.Grandchild}, rep.Children...)...)
}

// The first SIGTERM cancels the run's context with the signal as its
// cause and kills nothing by itself; a second one ends a harness whose
// cleanup hangs at once (exit 143), after the abort hooks killed every
// child.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	cmd, br, rep := startHelperHarness(t, "signal")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	line, _ := br.ReadString('\n')
	if strings.TrimSpace(line) != "interrupted by signal: terminated" {
		t.Fatalf("helper said %q, want the interruption cause", line)
	}
	for _, pid := range rep.Children {
		if gone(pid) {
			t.Fatalf("child %d killed by the first signal: the run's own cleanup does that", pid)
		}
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("helper exit %v, want 143", err)
	}
	t.Logf("exited %v after the second signal", time.Since(start).Round(time.Millisecond))
	var dir string
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "WORK_DIR="); ok {
			dir = v
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "aborted")); err != nil {
		t.Errorf("the abort hook did not run: %v", err)
	}
	assertAllGone(t, rep)
	reapOrphans(rep.Grandchild)
}

// A process can run as another user (how the environment runs PostgreSQL
// when the harness is root).
func TestCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: running as ourselves instead (the credential path needs root)")
	}
	u := os.Getuid()
	cred := &syscall.Credential{Uid: uint32(u), Gid: uint32(os.Getgid()), NoSetGroups: true}
	want := strconv.Itoa(u)
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true} // nobody
		want = "65534"
	}
	sup := newSup(t)
	p, err := sup.Start(context.Background(), Spec{Name: "who", Command: []string{"id", "-u"}, Credential: cred, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if log := readLog(t, p); !strings.Contains(log, "\n"+want+"\n") || p.ExitStatus() != "exit status 0" {
		t.Fatalf("status %s, log:\n%s", p.ExitStatus(), log)
	}
}

// A paused (SIGSTOPped) group can still be killed and restarted: the
// nemesis may heal a pause by killing.
func TestKillWhilePaused(t *testing.T) {
	sup := newSup(t)
	p, err := sup.Start(context.Background(), Spec{Name: "frozen", Command: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	eventually(t, "stopped", func() bool { return procState(pid) == "T" })
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.ExitStatus() != "signal: killed" {
		t.Fatalf("status %q", p.ExitStatus())
	}
	if err := p.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := procState(p.Pid()); st == "T" || st == "" {
		t.Fatalf("restarted process state %q", st)
	}
}
