package nemesis

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// TestMain doubles as the heartbeat component of the overlap tests: with
// SAGACHAOS_TEST_HELPER=heartbeat the test binary appends its wall clock
// to BEAT_FILE every few milliseconds and serves /healthz — a process whose
// file shows exactly when it ran.
func TestMain(m *testing.M) {
	switch os.Getenv("SAGACHAOS_TEST_HELPER") {
	case "heartbeat":
		heartbeat()
		return
	case "failpointer":
		failpointer()
		return
	}
	os.Exit(m.Run())
}

func heartbeat() {
	f, err := os.OpenFile(os.Getenv("BEAT_FILE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	go func() {
		for {
			fmt.Fprintf(f, "%d\n", time.Now().UnixNano())
			time.Sleep(3 * time.Millisecond)
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	_ = http.ListenAndServe(os.Getenv("LISTEN_ADDR"), mux)
	os.Exit(4)
}

// beats reads the heartbeat file: the wall-clock instants the process ran.
func beats(t *testing.T, path string) []time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
			out = append(out, time.Unix(0, n))
		}
	}
	return out
}

// overlapRun is one target with one heartbeat component, and a nemesis on
// it.
type overlapRun struct {
	rec   *models.Recorder
	env   *env.Env
	tg    *target.Target
	nem   *Nemesis
	beats string
}

func startHeartbeat(t *testing.T) *overlapRun {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sagachaos-overlap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e, err := env.Up(ctx, env.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	rec, _ := models.NewRecorder(nil, models.Header{})
	r := &overlapRun{rec: rec, env: e, beats: filepath.Join(dir, "beats")}
	m := &targets.Manifest{Name: "heartbeat", API: targets.API{Process: "beat"}, Processes: []targets.Process{{
		Name: "beat", Role: "worker", Command: []string{os.Args[0], "-test.run=^$"}, Health: "/healthz",
		Env: map[string]string{"SAGACHAOS_TEST_HELPER": "heartbeat", "BEAT_FILE": r.beats},
	}}}
	r.tg, err = target.Start(ctx, target.Config{Manifest: m, Env: e, Rec: rec, RunDir: dir, Log: slog.New(slog.DiscardHandler), FailpointLog: filepath.Join(dir, "failpoints.jsonl")}, scenarios.Scenario{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.tg.Close)
	r.nem = &Nemesis{Rec: rec, Env: e, Target: r.tg}
	return r
}

// overlap runs f1 at once and f2 when f1 has been in effect for a while:
// two windows on one target, f2's ending last.
func (r *overlapRun) overlap(t *testing.T, f1, f2 scenarios.Fault) {
	t.Helper()
	var mu sync.Mutex
	fired := map[int]chan struct{}{0: make(chan struct{}), 1: make(chan struct{})}
	close(fired[0])
	trigger := func(n int) <-chan struct{} { mu.Lock(); defer mu.Unlock(); return fired[n] }
	f1.AfterOrders, f2.AfterOrders = 0, 1
	done := make(chan struct{})
	go func() {
		r.nem.Run(context.Background(), []scenarios.Fault{f1, f2}, trigger, make(chan struct{}), make(chan struct{}))
		close(done)
	}()
	r.waitOp(t, f1.ID, models.PhaseStart)
	time.Sleep(f1.Duration.D() / 3)
	close(fired[1])
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the nemesis never ended the windows")
	}
}

func (r *overlapRun) waitOp(t *testing.T, id, phase string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, ok := r.journal()[id+"/"+phase]; ok {
			return
		}
	}
	t.Fatalf("no %s/%s in the journal", id, phase)
}

type journaled struct {
	at time.Time
	fr models.FaultRecord
}

func (r *overlapRun) journal() map[string]journaled {
	out := map[string]journaled{}
	for _, op := range r.rec.Ops() {
		var fr models.FaultRecord
		if op.Proc == models.ProcNemesis && op.Decode(&fr) == nil {
			out[fr.ID+"/"+fr.Phase] = journaled{r.rec.Start().Add(time.Duration(op.T)), fr}
		}
	}
	return out
}

// assertFrozenThrough checks what the component really saw against the
// journal: it ran before the first window opened, it did not run from the
// first window's start until well after the first window's end (a fault
// that ended the effect with its own window would let it run there), and
// it ran again after the last window ended. It logs the effective window
// of the journal beside the gap the heartbeat shows.
func assertFrozenThrough(t *testing.T, r *overlapRun, j map[string]journaled) {
	t.Helper()
	s1, e1, e2 := j["f1/start"].at, j["f1/end"].at, j["f2/end"].at
	mid := e1.Add(e2.Sub(e1) / 2)
	// Let the component show it runs again.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if bs := beats(t, r.beats); len(bs) > 0 && bs[len(bs)-1].After(e2) {
			break
		}
	}
	var before, after time.Time
	for _, b := range beats(t, r.beats) {
		switch {
		case !b.After(s1):
			before = b
		case b.Before(mid):
			t.Fatalf("the component ran at %v, inside the journaled window (%v after f1 started, f1 ended %v after, f2 %v after)",
				b.Format("15:04:05.000"), b.Sub(s1), e1.Sub(s1), e2.Sub(s1))
		case after.IsZero() && b.After(e1):
			after = b
		}
	}
	if before.IsZero() || after.IsZero() {
		t.Fatalf("the heartbeat never ran before (%v) or after (%v) the windows", before, after)
	}
	t.Logf("journal: effective window %v (f1 start → f2 end); heartbeat: no beat for %v", e2.Sub(s1).Round(time.Millisecond), after.Sub(before).Round(time.Millisecond))
}

func effects(j map[string]journaled, keys ...string) string {
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+j[k].fr.Detail["effect"])
	}
	return strings.Join(out, " ")
}

// TestOverlappingPausesCompose: the first pause's end does not resume a
// component the second pause still holds.
func TestOverlappingPausesCompose(t *testing.T) {
	r := startHeartbeat(t)
	d := scenarios.Duration(600 * time.Millisecond)
	r.overlap(t, scenarios.Fault{ID: "f1", Kind: "pause", Target: "beat", Duration: d}, scenarios.Fault{ID: "f2", Kind: "pause", Target: "beat", Duration: d})
	j := r.journal()
	want := "f1/start=paused f2/start=already paused: held by f1 f1/end=still paused: held by f2 f2/end=resumed"
	if got := effects(j, "f1/start", "f2/start", "f1/end", "f2/end"); got != want {
		t.Fatalf("journal %s\nwant    %s", got, want)
	}
	assertFrozenThrough(t, r, j)
}

// TestOverlappingKillsCompose: a kill of a component another kill holds
// down is journaled as such, kills nothing, and the component starts again
// only when the last window ends.
func TestOverlappingKillsCompose(t *testing.T) {
	r := startHeartbeat(t)
	d := scenarios.Duration(600 * time.Millisecond)
	r.overlap(t, scenarios.Fault{ID: "f1", Kind: "kill", Target: "beat", Duration: d}, scenarios.Fault{ID: "f2", Kind: "kill", Target: "beat", Duration: d})
	j := r.journal()
	want := "f1/start=killed f2/start=already down: held by f1 f1/end=still down: held by f2 f2/end=restarted"
	if got := effects(j, "f1/start", "f2/start", "f1/end", "f2/end"); got != want {
		t.Fatalf("journal %s\nwant    %s", got, want)
	}
	assertFrozenThrough(t, r, j)
	var life []string
	for _, op := range r.rec.Ops() {
		var ev models.ComponentEvent
		if op.Proc == models.ProcComponentPrefix+"beat" && op.Decode(&ev) == nil {
			life = append(life, fmt.Sprintf("%s#%d:%s", op.F, ev.Incarnation, ev.Cause))
		}
	}
	if got := strings.Join(life, " "); got != "start#1:initial healthy#1: exit#1:fault:f1 start#2:fault:f2 healthy#2:" {
		t.Errorf("component lifecycle %s", got)
	}
}

// TestOverlappingLinkDownsCompose: the first window's end does not restore
// a link the second still holds down; measured by dialling through it.
func TestOverlappingLinkDownsCompose(t *testing.T) {
	ctx := context.Background()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	l, err := e.NewLink("probe→server", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := models.NewRecorder(nil, models.Header{})
	r := &overlapRun{rec: rec, env: e, nem: &Nemesis{Rec: rec, Env: e}}
	// The probe: every few ms, a connection through the link that reads
	// the server's byte; each success is a beat.
	r.beats = filepath.Join(t.TempDir(), "beats")
	bf, _ := os.Create(r.beats)
	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// A beat is dated when its dial began: a connection made just
			// before the link went down may deliver its byte after, which
			// is no passage through a down link (dating it at the read
			// put a beat 17 µs inside the window under -race).
			dialed := time.Now()
			if c, err := net.DialTimeout("tcp", l.Listen(), 100*time.Millisecond); err == nil {
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); err == nil {
					fmt.Fprintf(bf, "%d\n", dialed.UnixNano())
				}
				c.Close()
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	d := scenarios.Duration(600 * time.Millisecond)
	r.overlap(t, scenarios.Fault{ID: "f1", Kind: "link-down", Target: "probe→server", Duration: d}, scenarios.Fault{ID: "f2", Kind: "link-down", Target: "probe→server", Duration: d})
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-probed
	bf.Close()
	j := r.journal()
	want := "f1/start=down f2/start=already down: held by f1 f1/end=still down: held by f2 f2/end=up"
	if got := effects(j, "f1/start", "f2/start", "f1/end", "f2/end"); got != want {
		t.Fatalf("journal %s\nwant    %s", got, want)
	}
	assertFrozenThrough(t, r, j)
}

// TestRewindOnlyRealGroups: a rewind aimed at a process that declares no
// consumer group is refused and stops nothing; one whose rewind fails still
// starts the component again.
func TestRewindOnlyRealGroups(t *testing.T) {
	r := startHeartbeat(t)
	r.nem.Rewinder = &failingRewinder{}
	r.nem.Run(context.Background(), []scenarios.Fault{{ID: "f1", Kind: "rewind", Target: "beat"}}, func(int) <-chan struct{} {
		c := make(chan struct{})
		close(c)
		return c
	}, make(chan struct{}), make(chan struct{}))
	j := r.journal()
	if fr := j["f1/instant"].fr; !strings.Contains(fr.Error, "declares no consumer group") {
		t.Fatalf("rewind of a process without groups journaled %+v", j)
	}
	for _, op := range r.rec.Ops() {
		if op.F == models.FComponentExit {
			t.Fatalf("a refused rewind stopped the component: %s", op.Value)
		}
	}
}

type failingRewinder struct{}

func (failingRewinder) Rewind(ctx context.Context, groups []string) (string, error) {
	return "", fmt.Errorf("rewind: groups %v did not become empty", groups)
}

// TestFailedRewindStartsTheComponentAgain: the undo of a rewind starts its
// instances even when the rewind itself failed.
func TestFailedRewindStartsTheComponentAgain(t *testing.T) {
	ctx := context.Background()
	tg := &fakeTarget{}
	rec, _ := models.NewRecorder(nil, models.Header{})
	n := &Nemesis{Rec: rec, Target: tg, Rewinder: failingRewinder{}}
	n.Run(ctx, []scenarios.Fault{{ID: "f1", Kind: "rewind", Target: "payment"}}, func(int) <-chan struct{} {
		c := make(chan struct{})
		close(c)
		return c
	}, make(chan struct{}), make(chan struct{}))
	if got := strings.Join(tg.calls, ";"); got != "stop payment;start payment" {
		t.Fatalf("component calls %q, want the stop undone", got)
	}
	var end models.FaultRecord
	for _, op := range rec.Ops() {
		var fr models.FaultRecord
		if op.Decode(&fr) == nil && fr.Phase == models.PhaseEnd {
			end = fr
		}
	}
	if !strings.Contains(end.Error, "did not become empty") {
		t.Fatalf("end %+v does not say the rewind failed", end)
	}
}

type stalledRewinder struct{ saw chan error }

func (r stalledRewinder) Rewind(ctx context.Context, _ []string) (string, error) {
	<-ctx.Done()
	r.saw <- ctx.Err()
	return "", ctx.Err()
}

// TestUndoGivesUpAfterInterrupt: an undo that stalls (a rewind waiting for
// a group that never empties) is cancelled shortly after the run is
// interrupted, and the nemesis returns instead of holding the exit.
func TestUndoGivesUpAfterInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tg := &fakeTarget{}
	rec, _ := models.NewRecorder(nil, models.Header{})
	rw := stalledRewinder{saw: make(chan error, 1)}
	n := &Nemesis{Rec: rec, Target: tg, Rewinder: rw}
	done := make(chan struct{})
	go func() {
		n.Run(ctx, []scenarios.Fault{{ID: "f1", Kind: "rewind", Target: "payment"}}, func(int) <-chan struct{} {
			c := make(chan struct{})
			close(c)
			return c
		}, make(chan struct{}), make(chan struct{}))
		close(done)
	}()
	for deadline := time.Now().Add(10 * time.Second); len(rec.Ops()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rewind never started")
		}
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the nemesis still waits on a stalled undo 30s after the interrupt")
	}
	t.Logf("the nemesis returned %v after the interrupt (undo grace %v)", time.Since(start).Round(time.Millisecond), undoGrace)
	if err := <-rw.saw; err == nil {
		t.Fatal("the rewind's context was not cancelled")
	}
	if got := strings.Join(tg.calls, ";"); got != "stop payment;start payment" {
		t.Errorf("component calls %q: the undo must still start what it stopped", got)
	}
}
