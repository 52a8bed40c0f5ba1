package env

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const helperEnv = "SAGACHAOS_ENV_HELPER"

// TestHelperProcess is not a test: re-executed by TestHarnessSIGKILL, it
// brings an environment up, prints what it started and blocks until killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := Up(ctx, Config{Databases: []string{"orders"}, Topics: []Topic{{Name: "events", Partitions: 1}}})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	l, err := e.PostgresLink("orders")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	kb, _ := e.KafkaBrokersFor("relay-1")
	p := e.pg.(*localPG)
	fmt.Printf("READY %d %s %s %s %s %s %d\n", p.pid(), p.addr(), p.dataDir, l.Listen(), e.DirectBrokers()[0], kb[0], sysvShmID(p.dataDir))
	<-ctx.Done() // the parent SIGKILLs us long before
	os.Exit(3)
}

// TestHarnessSIGKILL kills a harness process with SIGKILL while its
// PostgreSQL runs and finds nothing of it left: no postmaster, no backend of
// its process group, no listening port; a later Up sweeps its data dir.
func TestHarnessSIGKILL(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var fields []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "READY ") {
			fields = strings.Fields(sc.Text())[1:]
			break
		}
		if strings.HasPrefix(sc.Text(), "ERROR") {
			t.Fatalf("helper: %s", sc.Text())
		}
	}
	if len(fields) != 7 {
		t.Fatalf("helper printed no READY line (scan err %v)", sc.Err())
	}
	pgPID, _ := strconv.Atoi(fields[0])
	addrs := map[string]string{"postgres": fields[1], "postgres link": fields[3], "kafka": fields[4], "kafka link": fields[5]}
	dataDir := fields[2]
	shmID, _ := strconv.Atoi(fields[6])
	if shmID < 0 {
		t.Fatalf("no System V segment id in %s/postmaster.pid", dataDir)
	}
	if !processAlive(pgPID) {
		t.Fatalf("postmaster %d not running before the kill", pgPID)
	}
	kids := childrenOf(pgPID)
	if len(kids) < 2 {
		t.Fatalf("expected postmaster %d with backends and auxiliaries, found children %v", pgPID, kids)
	}
	t.Logf("postmaster %d, children %v, data dir %s", pgPID, kids, dataDir)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	eventually(t, "postmaster and its backends gone", func() error {
		if processAlive(pgPID) {
			return fmt.Errorf("postmaster %d alive", pgPID)
		}
		for _, k := range kids {
			if processAlive(k) {
				return fmt.Errorf("postgres child %d alive", k)
			}
		}
		return nil
	})
	for what, a := range addrs {
		eventually(t, what+" port closed", func() error {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				return fmt.Errorf("%s %s still accepts connections", what, a)
			}
			return nil
		})
	}
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("data dir %s already gone before the sweep? %v", dataDir, err)
	}
	// A later run sweeps the data dir of a harness that died by SIGKILL.
	e, err := Up(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale data dir %s not swept: %v", dataDir, err)
	}
	if _, err := unix.SysvShmCtl(shmID, unix.IPC_STAT, &unix.SysvShmDesc{}); err == nil {
		t.Errorf("System V segment %d of the killed cluster not removed by the sweep", shmID)
	}
}
