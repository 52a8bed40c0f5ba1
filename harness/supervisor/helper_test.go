package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the processes the tests supervise: with
// helperEnv set, TestMain runs that role instead of the tests.
const helperEnv = "SUPERVISOR_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		// Orphans of the processes under test (a grandchild whose parent
		// was killed) are reparented to us rather than to PID 1, which in
		// a container may never reap them; reapOrphans collects them.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
			os.Exit(2)
		}
		os.Exit(m.Run())
	case "serve":
		helperServe()
	case "harness":
		helperHarness(false)
	case "signal":
		helperHarness(true)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helperServe listens on $LISTEN (default 127.0.0.1:0), writes its port to
// $PORT_FILE when set, and serves GET /health until killed.
func helperServe() {
	addr := os.Getenv("LISTEN")
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if f := os.Getenv("PORT_FILE"); f != "" {
		writeFileAtomic(f, strconv.Itoa(port))
	}
	fmt.Printf("serving on %s pid %d\n", ln.Addr(), os.Getpid())
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
}

func writeFileAtomic(path, content string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		panic(err)
	}
}

// harnessReport is what the "harness" helper prints once its children run.
type harnessReport struct {
	Children   []int `json:"children"`
	Grandchild int   `json:"grandchild"`
	Ports      []int `json:"ports"`
	Watchdog   int   `json:"watchdog"`
}

// helperHarness plays a harness: it supervises a sleeper, a listener, and a
// shell that starts a listening grandchild, prints their pids and ports,
// and then waits to be killed (or, with signals, to be interrupted).
func helperHarness(signals bool) {
	dir := os.Getenv("WORK_DIR")
	self, _ := os.Executable()
	sup := New(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx := context.Background()
	var stop func()
	if signals {
		ctx, stop = NotifyContext(ctx)
		defer stop()
		defer OnAbort(func() {
			_ = sup.KillAll()
			writeFileAtomic(filepath.Join(dir, "aborted"), "yes")
		})()
	}
	must := func(p *Proc, err error) *Proc {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return p
	}
	logs := filepath.Join(dir, "logs")
	a := must(sup.Start(ctx, Spec{Name: "sleeper", Command: []string{"sleep", "1000"}, LogDir: logs}))
	b := must(sup.Start(ctx, Spec{Name: "listener", Command: []string{self}, LogDir: logs,
		Env: []string{helperEnv + "=serve", "PORT_FILE=" + filepath.Join(dir, "listener.port")}}))
	c := must(sup.Start(ctx, Spec{Name: "forker", LogDir: logs,
		Command: []string{"sh", "-c", `"$SELF" & echo $! > "$WORK_DIR/grandchild.pid"; wait`},
		Env:     []string{"SELF=" + self, "WORK_DIR=" + dir, helperEnv + "=serve", "PORT_FILE=" + filepath.Join(dir, "grandchild.port")}}))
	rep := harnessReport{Children: []int{a.Pid(), b.Pid(), c.Pid()}}
	rep.Ports = append(rep.Ports, atoiFile(filepath.Join(dir, "listener.port")), atoiFile(filepath.Join(dir, "grandchild.port")))
	rep.Grandchild = atoiFile(filepath.Join(dir, "grandchild.pid"))
	sup.mu.Lock()
	rep.Watchdog = sup.wd.cmd.Process.Pid
	sup.mu.Unlock()
	b2, _ := json.Marshal(rep)
	fmt.Println(string(b2))
	if !signals {
		select {}
	}
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	// A cleanup that hangs: only a second signal ends the harness now.
	select {}
}

// atoiFile waits for a helper to write a number to path.
func atoiFile(path string) int {
	for i := 0; ; i++ {
		b, err := os.ReadFile(path)
		if err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return n
			}
		}
		if i > 2000 {
			fmt.Fprintln(os.Stderr, "gave up waiting for", path)
			os.Exit(1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
