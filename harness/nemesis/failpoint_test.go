package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/scenarios/faults"
	"github.com/sagachaos/sagachaos/targets"
)

// failpointer is a component that speaks the failpoint contract of
// docs/target-contract.md with one point, "w.tick", hit every few ms: it
// logs the first hit and every armed crash, and SIGKILLs itself there. Each
// incarnation appends the SAGACHAOS_FAILPOINTS it was started with to
// ARMED_FILE.
func failpointer() {
	spec := os.Getenv("SAGACHAOS_FAILPOINTS")
	if f, err := os.OpenFile(os.Getenv("ARMED_FILE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintln(f, spec)
		f.Close()
	}
	crashAt := map[int]bool{}
	for _, e := range strings.Split(spec, ";") {
		var hit int
		if _, err := fmt.Sscanf(e, "w.tick=crash@%d", &hit); err == nil {
			crashAt[hit] = true
		}
	}
	log, _ := os.OpenFile(os.Getenv("SAGACHAOS_FAILPOINT_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	write := func(hit int, action string) {
		b, _ := json.Marshal(map[string]any{"instance": os.Getenv("SAGACHAOS_INSTANCE"), "failpoint": "w.tick", "hit": hit, "action": action})
		log.Write(append(b, '\n'))
	}
	go func() {
		time.Sleep(100 * time.Millisecond) // healthy first
		for hit := 1; ; hit++ {
			if hit == 1 {
				write(hit, "")
			}
			if crashAt[hit] {
				write(hit, "crash")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	_ = http.ListenAndServe(os.Getenv("LISTEN_ADDR"), mux)
}

// TestFailpointFaultsFireOneByOne: two crash faults on one point of one
// instance stay two, the crash of the first does not disarm the second nor
// a third on another hit, and the journal tells armed from fired.
func TestFailpointFaultsFireOneByOne(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sagachaos-fp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	e, err := env.Up(ctx, env.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	armedFile := filepath.Join(dir, "armed")
	m := &targets.Manifest{Name: "fp", API: targets.API{Process: "w"}, Processes: []targets.Process{{
		Name: "w", Role: "worker", Command: []string{os.Args[0], "-test.run=^$"}, Health: "/healthz",
		Env: map[string]string{"SAGACHAOS_TEST_HELPER": "failpointer", "ARMED_FILE": armedFile},
	}}}
	plan := []scenarios.Fault{
		{ID: "f1", Kind: "failpoint", Target: "w.tick", Params: &faults.Failpoint{Component: "w", Action: "crash", Hit: 3}},
		{ID: "f2", Kind: "failpoint", Target: "w.tick", Params: &faults.Failpoint{Component: "w", Action: "crash", Hit: 5}},
		{ID: "f3", Kind: "failpoint", Target: "w.tick", Params: &faults.Failpoint{Component: "w", Action: "crash", Hit: 100000}},
	}
	rec, _ := models.NewRecorder(nil, models.Header{})
	tg, err := target.Start(ctx, target.Config{Manifest: m, Env: e, Rec: rec, RunDir: dir, Log: slog.New(slog.DiscardHandler),
		FailpointLog: filepath.Join(dir, "failpoints.jsonl")}, scenarios.Scenario{Faults: plan})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	n := &Nemesis{Rec: rec, Env: e, Target: tg}
	n.Run(ctx, plan, func(int) <-chan struct{} { c := make(chan struct{}); close(c); return c }, make(chan struct{}), make(chan struct{}))
	// Two crashes, two restarts: then the third incarnation runs on.
	for deadline := time.Now().Add(30 * time.Second); tg.Crashes() < 2 || incarnations(rec) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crashes %d, incarnations %d", tg.Crashes(), incarnations(rec))
		}
	}
	tg.Close()
	b, _ := os.ReadFile(armedFile)
	want := "w.tick=crash@3;w.tick=crash@5;w.tick=crash@100000\nw.tick=crash@5;w.tick=crash@100000\nw.tick=crash@100000\n"
	if string(b) != want {
		t.Errorf("incarnations were armed with\n%swant\n%s", b, want)
	}
	var got []string
	for _, o := range Outcomes(FaultJournal(rec.History())) {
		got = append(got, o.ID+": "+o.What)
	}
	if g := strings.Join(got, "; "); g != "f1: fired on w at hit 3; f2: fired on w at hit 5; f3: armed, never fired" {
		t.Errorf("outcomes %s", g)
	}
	fired := 0
	for _, op := range rec.Ops() {
		var ev models.FailpointEvent
		if op.Proc == models.ProcComponentPrefix+"w" && op.F == models.FFailpoint && op.Decode(&ev) == nil && ev.Fired {
			fired++
		}
	}
	if fired != 2 {
		t.Errorf("%d fired failpoint ops in the history, want 2", fired)
	}
}

func incarnations(rec *models.Recorder) int {
	n := 0
	for _, op := range rec.Ops() {
		if op.F == models.FComponentHealthy {
			n++
		}
	}
	return n
}
