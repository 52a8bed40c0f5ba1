package env

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// EnvPGBinDir overrides the PostgreSQL binary lookup: when set, only that
// directory is searched (tests point it at a nonexistent path).
const EnvPGBinDir = "SAGACHAOS_PG_BINDIR"

const pgDirPrefix = "sagachaos-pg-"

// EnvPGDataRoot overrides where PostgreSQL data dirs (and the cached initdb
// template) go.
const EnvPGDataRoot = "SAGACHAOS_PG_DATA_ROOT"

// pgDataRoot is the parent of data dirs: $SAGACHAOS_PG_DATA_ROOT, else
// /dev/shm when it is a writable tmpfs, else os.TempDir(). Measured here,
// copying the 39 MB template took 0.83 s onto the /tmp disk and 0.09 s onto
// /dev/shm, and CREATE DATABASE is I/O too; a throwaway cluster with
// fsync=off loses nothing by living in memory (a SIGKILL of the postmaster
// keeps what it wrote, as with the page cache).
func pgDataRoot() string {
	if d := os.Getenv(EnvPGDataRoot); d != "" {
		return d
	}
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic &&
		st.Bavail*uint64(st.Bsize) > 1<<30 && syscall.Access("/dev/shm", 2) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// pgSearchGlob is the last place findPGBinDir looks (a variable so tests can
// simulate a machine without PostgreSQL).
var pgSearchGlob = "/usr/lib/postgresql/*/bin"

// findPGBinDir looks for initdb and postgres: $SAGACHAOS_PG_BINDIR alone if
// set; else PATH, `pg_config --bindir`, /usr/lib/postgresql/*/bin (newest).
func findPGBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d, ok := os.LookupEnv(EnvPGBinDir); ok {
		if has(d) {
			return d, nil
		}
		return "", unavailable("postgres: local binaries not found in "+EnvPGBinDir+"="+d,
			"point "+EnvPGBinDir+" at the directory holding initdb and postgres, or pass --postgres dsn", nil)
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(p, "--bindir").Output(); err == nil {
			if d := strings.TrimSpace(string(out)); has(d) {
				return d, nil
			}
		}
	}
	dirs, _ := filepath.Glob(pgSearchGlob)
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", unavailable("postgres: local binaries not found (looked in PATH, `pg_config --bindir` and /usr/lib/postgresql/*/bin)",
		"install postgresql-15 (apt-get install postgresql-15) or pass --postgres dsn", nil)
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// pgCredential is who runs initdb and postgres: they refuse to run as root,
// so as root use the "postgres" system user, else "nobody". nil means the
// current user.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, unavailable("postgres: running as root and neither the postgres nor the nobody user exists",
		"create a postgres system user (useradd -r postgres) or run as a non-root user", nil)
}

// localPG is an ephemeral cluster in a temp dir, cloned from a cached initdb
// template, on a free loopback port.
type localPG struct {
	bindir  string
	cred    *syscall.Credential
	dataDir string
	logPath string
	port    int
	log     *slog.Logger
	// settings are the target's (postgres_settings.go): "-c" arguments at
	// every start.
	settings map[string]string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

var versionRE = regexp.MustCompile(`\d+(\.\d+)*`)

func startLocalPG(ctx context.Context, runDir string, log *slog.Logger, settings map[string]string) (_ *localPG, err error) {
	bindir, err := findPGBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	sweepStaleDataDirs(log)
	iargs, err := initdbArgs(settings)
	if err != nil {
		return nil, err
	}
	tmpl, err := pgTemplate(ctx, bindir, cred, iargs...)
	if err != nil {
		return nil, err
	}
	p := &localPG{bindir: bindir, cred: cred, log: log, settings: settings}
	// The data dir sits directly under the data root: a root-owned 0700
	// parent would lock the postgres user out. Its name carries our pid so
	// a later run can sweep it if we die by SIGKILL.
	name, err := os.MkdirTemp(pgDataRoot(), fmt.Sprintf("%s%d-", pgDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("postgres: make data dir: %w", err)
	}
	p.dataDir = name
	defer func() {
		if err != nil {
			_ = p.close()
		}
	}()
	if err := os.Remove(name); err != nil {
		return nil, fmt.Errorf("postgres: make data dir: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", tmpl, p.dataDir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("postgres: copy template %s: %w: %s", tmpl, err, bytes.TrimSpace(out))
	}
	if runDir != "" {
		p.logPath = filepath.Join(runDir, "postgres.log")
	} else {
		p.logPath = filepath.Join(p.dataDir, "postgres.log")
	}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// pgTemplate returns a cluster made by initdb once per PostgreSQL version
// and cached under the temp dir; initdb is the 1–2 s of a cold start, a copy
// of its result is ~50 ms. Made in a scratch dir and renamed into place, so a
// concurrent or killed run never sees a half-made template. Settings only
// initdb can make (postgres_settings.go) come in as extra initdb arguments
// and key a template of their own.
func pgTemplate(ctx context.Context, bindir string, cred *syscall.Credential, extra ...string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(bindir, "postgres"), "--version").Output()
	if err != nil {
		return "", unavailable("postgres: cannot run "+filepath.Join(bindir, "postgres"), "reinstall postgresql or pass --postgres dsn", err)
	}
	ver := versionRE.FindString(string(out))
	if ver == "" {
		ver = "unknown"
	}
	owner := "self"
	if cred != nil {
		owner = strconv.Itoa(int(cred.Uid))
	}
	dir := filepath.Join(pgDataRoot(), fmt.Sprintf("sagachaos-pgtemplate-%s-%s%s", ver, owner, templateKey(extra)))
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return dir, nil
	}
	scratch, err := os.MkdirTemp(pgDataRoot(), "sagachaos-pgtemplate-tmp-")
	if err != nil {
		return "", fmt.Errorf("postgres: template scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	if cred != nil {
		if err := os.Chown(scratch, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", fmt.Errorf("postgres: chown %s: %w", scratch, err)
		}
	}
	data := filepath.Join(scratch, "data")
	cmd := exec.CommandContext(ctx, filepath.Join(bindir, "initdb"), append([]string{"-D", data,
		"-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	cmd.Dir = scratch
	var initOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &initOut, &initOut
	var serr error
	onForkThread(func() { serr = cmd.Start() })
	if serr == nil {
		serr = cmd.Wait()
	}
	if serr != nil {
		return "", fmt.Errorf("postgres: initdb: %w: %s", serr, lastLines(initOut.Bytes(), 5))
	}
	if err := os.Rename(data, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "PG_VERSION")); serr == nil {
			return dir, nil // another run won the race
		}
		return "", fmt.Errorf("postgres: install template %s: %w", dir, err)
	}
	return dir, nil
}

func (p *localPG) start(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if p.port == 0 || attempt > 0 {
			port, err := freePort()
			if err != nil {
				return err
			}
			p.port = port
		}
		if lastErr = p.startOnce(ctx); lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return lastErr
}

func (p *localPG) startOnce(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("postgres: open log %s: %w", p.logPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(p.bindir, "postgres"),
		"-D", p.dataDir, "-p", strconv.Itoa(p.port), "-h", "127.0.0.1", "-k", p.dataDir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=on",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB",
		// DSM segments as files in the data dir, not /dev/shm/PostgreSQL.*,
		// so a SIGKILLed cluster leaves nothing outside its data dir.
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning")
	cmd.Args = append(cmd.Args, serverArgs(p.settings)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group (a Ctrl-C to the harness is ours to handle), run as
	// the postgres user, and SIGKILLed by the kernel if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	var serr error
	onForkThread(func() { serr = cmd.Start() })
	if serr != nil {
		return fmt.Errorf("postgres: start: %w", serr)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, p.dsn("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			p.log.Debug("postgres up", "pid", cmd.Process.Pid, "port", p.port)
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres: exited during start (log %s): %s", p.logPath, tailFile(p.logPath, 3))
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("postgres: start: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("postgres: not accepting connections after 30s (log %s): %w", p.logPath, err)
		}
	}
}

func (p *localPG) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

func (p *localPG) addr() string { return fmt.Sprintf("127.0.0.1:%d", p.port) }

func (p *localPG) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill SIGKILLs the postmaster and every process of the cluster and waits
// until all of them are gone, so the port, the data dir and the shared
// memory block are free again. The postmaster is stopped first so it forks
// no backend between the listing and the kill, and the cluster's processes
// are found by their working directory (every PostgreSQL process runs in
// its data dir) as well as by parent: a backend forked just before the
// postmaster died is reparented to init and would otherwise live on holding
// the shared memory block, and every restart would fail with "pre-existing
// shared memory block is still in use" (seen under a load of 15: the
// database never came back and the run ended unknown).
func (p *localPG) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pm := cmd.Process.Pid
	_ = syscall.Kill(pm, syscall.SIGSTOP)
	for i := 0; i < 200; i++ {
		if st, _, ok := procStat(pm); !ok || st == "T" || st == "t" || st == "Z" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	kids := append(childrenOf(pm), processesIn(p.dataDir)...)
	_ = syscall.Kill(pm, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		for _, k := range append(kids, processesIn(p.dataDir)...) {
			if k != pm && processAlive(k) && !slices.Contains(left, k) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			p.log.Warn("postgres processes still alive after SIGKILL", "postmaster", pm, "processes", left)
			return
		}
		for _, k := range left {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// processesIn lists the live processes whose working directory is dir.
func processesIn(dir string) []int {
	if dir == "" {
		return nil
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // /proc/PID/cwd is the resolved path
	}
	return processesWhere(func(pid int) bool {
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		return err == nil && cwd == dir && processAlive(pid)
	})
}

// childrenOf lists the live children of pid, from /proc.
func childrenOf(pid int) []int {
	return processesWhere(func(c int) bool {
		st, ppid, ok := procStat(c)
		return ok && st != "Z" && ppid == pid
	})
}

// processesWhere lists the processes in /proc that satisfy keep.
func processesWhere(keep func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && keep(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's state and parent pid from /proc/PID/stat.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// processAlive is true for a live, non-zombie process: an orphan may linger
// as a zombie under a PID 1 that does not reap, and that is dead enough.
func processAlive(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != "Z"
}

func (p *localPG) crash(ctx context.Context) error {
	p.kill()
	return nil
}

func (p *localPG) restart(ctx context.Context) error {
	p.kill()
	// Same port, so DSNs and links stay valid; crash recovery replays WAL,
	// and with synchronous_commit=on every acknowledged commit is in it.
	var err error
	for i := 0; i < 20; i++ {
		if err = p.startOnce(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("postgres: restart on port %d: %w", p.port, err)
}

func (p *localPG) close() error {
	shm := sysvShmID(p.dataDir)
	p.kill()
	removeSysvShm(shm)
	if p.dataDir != "" {
		if err := os.RemoveAll(p.dataDir); err != nil {
			return fmt.Errorf("postgres: remove data dir: %w", err)
		}
	}
	return nil
}

func (p *localPG) describe() string {
	return fmt.Sprintf("local %s (pid %d, data %s, log %s)", p.addr(), p.pid(), p.dataDir, p.logPath)
}

// sweepStaleDataDirs removes data dirs left by harnesses that died by
// SIGKILL: their name carries the owner pid; a dir is stale when that pid is
// gone and no postmaster runs in it.
func sweepStaleDataDirs(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(pgDataRoot(), pgDirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), pgDirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if pm, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && alive(pm) {
				continue
			}
		}
		removeSysvShm(sysvShmID(d))
		if err := os.RemoveAll(d); err == nil {
			log.Info("removed stale postgres data dir", "dir", d, "owner_pid", pid)
		}
	}
}

// sysvShmID reads the id of the small System V segment PostgreSQL uses as
// an interlock from line 7 of postmaster.pid ("key id"); -1 if none.
func sysvShmID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return -1
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return -1
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return -1
	}
	id, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return id
}

// removeSysvShm removes a dead cluster's interlock segment, which a SIGKILL
// leaves in the kernel (56 bytes each, but they add up over many runs). A
// segment someone still attaches is left alone.
func removeSysvShm(id int) {
	if id < 0 {
		return
	}
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d); err != nil || d.Nattch != 0 {
		return
	}
	_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
}

func alive(pid int) bool { return processAlive(pid) }

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(b, n)
}
