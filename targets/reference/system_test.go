package reference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/supervisor"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// bin is the reftarget binary, built once per test binary.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reftarget-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(2)
	}
	bin = filepath.Join(dir, "reftarget")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/reftarget")
	cmd.Dir = filepath.Dir(file)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build reftarget: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	dbNames    = []string{"orders", "inventory", "payment", "delivery"}
	components = []string{"orders", "inventory", "payment", "delivery", "relay-1", "relay-2"}
)

// system is the reference target running on an embedded environment.
type system struct {
	t      testing.TB
	env    *env.Env
	world  *world.World
	rec    *models.Recorder
	sup    *supervisor.Supervisor
	stock  map[string]int64
	api    string
	logDir string
	step   time.Duration
	fpLog  string

	mu    sync.Mutex
	specs map[string]supervisor.Spec
	pools map[string]*pgxpool.Pool
}

type sysOpts struct {
	stock       map[string]int64
	stepTimeout time.Duration
	// failpoints per component instance ("payment" → "payment.after-charge=crash@2").
	failpoints map[string]string
	// mutant is the planted bug to switch on in every process.
	mutant string
	// cdc runs the relays as the CDC flavour (cdc-relay) on a cluster
	// with wal_level=logical (cdc_test.go).
	cdc bool
}

func startSystem(t testing.TB, o sysOpts) *system {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var topics []env.Topic
	for _, n := range dbNames {
		topics = append(topics, env.Topic{Name: n, Partitions: 4})
	}
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: dbNames, Topics: topics, PostgresSettings: cdcSettings(o.cdc)})
	if err != nil {
		t.Fatalf("environment up (needs the PostgreSQL binaries, see harness/env): %v", err)
	}
	t.Cleanup(func() { e.Close() })
	rec, _ := models.NewRecorder(nil, models.Header{Run: t.Name()})
	w, err := world.Start(ctx, rec, targets.OrderDomain().World)
	if err != nil {
		t.Fatalf("world: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	sup := supervisor.New(nil)
	t.Cleanup(func() { sup.KillAll() })
	if o.stepTimeout == 0 {
		o.stepTimeout = 30 * time.Second
	}
	s := &system{t: t, env: e, world: w, rec: rec, sup: sup, stock: o.stock, logDir: t.TempDir(), step: o.stepTimeout,
		specs: map[string]supervisor.Spec{}}
	s.fpLog = filepath.Join(s.logDir, "failpoints.jsonl")
	stockJSON, _ := json.Marshal(o.stock)
	urls := w.URLs()
	brokers := strings.Join(e.DirectBrokers(), ",")
	var relayDBs []string
	for _, d := range dbNames {
		relayDBs = append(relayDBs, d+"="+e.DirectDSN(d))
	}
	for _, name := range components {
		addr := freeAddr(t)
		envv := []string{"LISTEN_ADDR=" + addr, "KAFKA_BROKERS=" + brokers, "SAGACHAOS_INSTANCE=" + name,
			"SAGACHAOS_FAILPOINT_LOG=" + s.fpLog, "KAFKA_SESSION_TIMEOUT=1s", "SAGACHAOS_MUTANT=" + o.mutant}
		comp := name
		switch name {
		case "orders":
			envv = append(envv, "DATABASE_URL="+e.DirectDSN("orders"), "MAILER_URL="+urls["mailer"], "STEP_TIMEOUT="+o.stepTimeout.String())
			s.api = "http://" + addr
		case "inventory":
			envv = append(envv, "DATABASE_URL="+e.DirectDSN("inventory"), "INITIAL_STOCK="+string(stockJSON))
		case "payment":
			envv = append(envv, "DATABASE_URL="+e.DirectDSN("payment"), "PAYMENT_GATEWAY_URL="+urls["gateway"])
		case "delivery":
			envv = append(envv, "DATABASE_URL="+e.DirectDSN("delivery"), "CARRIER_URL="+urls["carrier"])
		default:
			comp = relayComponent(o.cdc)
			envv = append(envv, "RELAY_DATABASES="+strings.Join(relayDBs, " "), "OUTBOX_CLEANUP_INTERVAL=300ms")
		}
		spec := supervisor.Spec{Name: name, Command: []string{bin, comp}, Env: envv, LogDir: s.logDir, HealthURL: "http://" + addr + "/healthz"}
		s.specs[name] = spec
		if fp := o.failpoints[name]; fp != "" {
			spec.Env = append(append([]string(nil), spec.Env...), "SAGACHAOS_FAILPOINTS="+fp)
		}
		p, err := sup.Start(ctx, spec)
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		if err := sup.WaitHealthy(ctx, p, 30*time.Second); err != nil {
			t.Fatalf("%s not healthy: %v", name, err)
		}
	}
	return s
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// restartOnCrash restarts a component each time it dies, without its
// failpoints (they fired), until ctx ends. It returns how many restarts it
// did through the returned func.
func (s *system) restartOnCrash(ctx context.Context, name string) func() int {
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			p := s.sup.Proc(name)
			select {
			case <-ctx.Done():
				return
			case <-p.Exited():
			}
			if ctx.Err() != nil {
				return
			}
			if _, err := s.sup.Start(ctx, s.specs[name]); err != nil {
				s.t.Errorf("restart %s: %v", name, err)
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

type orderReq struct {
	Key      string        `json:"-"`
	Customer string        `json:"customer"`
	Items    []models.Item `json:"items"`
	Card     string        `json:"card"`
	Total    int64         `json:"total"`
}

type orderView struct {
	ID             string        `json:"id"`
	Status         string        `json:"status"`
	IdempotencyKey string        `json:"idempotency_key"`
	Items          []models.Item `json:"items"`
	Card           string        `json:"card"`
	Trail          []string      `json:"trail"`
}

// place POSTs an order, retrying an unknown outcome with the same key (as
// a careful client does); it returns the order id.
func (s *system) place(ctx context.Context, r orderReq) (string, error) {
	body, _ := json.Marshal(r)
	var last error
	for attempt := 0; attempt < 100 && ctx.Err() == nil; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/orders", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", r.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				var out struct{ ID string }
				if err := json.Unmarshal(b, &out); err != nil {
					return "", fmt.Errorf("decode reply %s: %w", b, err)
				}
				return out.ID, nil
			}
			if resp.StatusCode/100 == 4 {
				return "", fmt.Errorf("order %s refused: %d %s", r.Key, resp.StatusCode, b)
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("order %s: no definite answer: %v", r.Key, last)
}

func (s *system) orders(ctx context.Context) ([]orderView, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.api+"/orders", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /orders: %d", resp.StatusCode)
	}
	var out []orderView
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// placeAll places reqs from `clients` concurrent clients.
func (s *system) placeAll(ctx context.Context, reqs []orderReq, clients int) map[string]orderReq {
	s.t.Helper()
	var mu sync.Mutex
	ids := map[string]orderReq{}
	ch := make(chan orderReq)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range ch {
				id, err := s.place(ctx, r)
				if err != nil {
					s.t.Errorf("place: %v", err)
					continue
				}
				mu.Lock()
				ids[id] = r
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		ch <- r
	}
	close(ch)
	wg.Wait()
	return ids
}

// settle waits until every order is terminal. The bound only stops a hung
// test; it asserts nothing about speed.
func (s *system) settle(ctx context.Context, want int) []orderView {
	s.t.Helper()
	deadline := time.Now().Add(4*s.step + 90*time.Second)
	for {
		os, err := s.orders(ctx)
		pending := 0
		for _, o := range os {
			if o.Status == models.StatusPending {
				pending++
			}
		}
		if err == nil && len(os) >= want && pending == 0 {
			return os
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sagas did not settle: %d orders, %d pending, err %v; logs in %s\n%s", len(os), pending, err, s.logDir, s.tails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *system) tails() string {
	var b strings.Builder
	for _, p := range s.sup.Procs() {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name(), p.ExitStatus(), p.LastLogLines(8))
	}
	return b.String()
}

// verify checks the final state against the world and the stock: every
// order terminal; one succeeded charge, one shipment and one confirmation
// e-mail per approved order and none for cancelled ones; no refund; a
// declined card never approved; stock conserved and never negative.
func (s *system) verify(ctx context.Context, placed map[string]orderReq, final []orderView) {
	t := s.t
	t.Helper()
	status := map[string]string{}
	for _, o := range final {
		status[o.ID] = o.Status
		if o.Status != models.StatusApproved && o.Status != models.StatusCancelled {
			t.Errorf("order %s ends %s", o.ID, o.Status)
		}
	}
	if len(final) != len(placed) {
		t.Errorf("target knows %d orders, clients placed %d (idempotency keys must create one order each)", len(final), len(placed))
	}
	for id, r := range placed {
		if strings.HasPrefix(r.Card, "tok_decline") && status[id] == models.StatusApproved {
			t.Errorf("order %s with a declined card %s is APPROVED", id, r.Card)
		}
	}
	charges := map[string]int{}
	for _, c := range s.world.Provider("gateway").Effects("charge") {
		if c.Status == models.ChargeSucceeded {
			charges[c.Saga]++
		}
	}
	if n := len(s.world.Provider("gateway").Effects("refund")); n != 0 {
		t.Errorf("%d refunds: the reference never refunds a successful charge", n)
	}
	ships := map[string]int{}
	for _, sh := range s.world.Provider("carrier").Effects("shipment") {
		ships[sh.Saga]++
	}
	mails := map[string]int{}
	for _, m := range s.world.Provider("mailer").Effects("email") {
		if m.Request["kind"] == "confirmation" {
			mails[m.Saga]++
		}
	}
	approvedQty := map[string]int64{}
	approved := 0
	for id, st := range status {
		want := 0
		if st == models.StatusApproved {
			want = 1
			approved++
			for _, it := range placed[id].Items {
				approvedQty[it.SKU] += int64(it.Qty)
			}
		}
		if charges[id] != want || ships[id] != want || mails[id] != want {
			t.Errorf("order %s %s: %d charges, %d shipments, %d e-mails; want %d of each", id, st, charges[id], ships[id], mails[id], want)
		}
	}
	for id := range charges {
		if _, ok := status[id]; !ok {
			t.Errorf("charge for unknown order %s", id)
		}
	}
	pool, err := pgxpool.New(ctx, s.env.DirectDSN("inventory"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT sku, available, reserved FROM stock`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var sku string
		var a, r int64
		if err := rows.Scan(&sku, &a, &r); err != nil {
			t.Fatal(err)
		}
		seen[sku] = true
		if a < 0 || r != approvedQty[sku] || a+r != s.stock[sku] {
			t.Errorf("stock %s: available %d reserved %d; initial %d, approved orders hold %d", sku, a, r, s.stock[sku], approvedQty[sku])
		}
	}
	rows.Close()
	for sku := range s.stock {
		if !seen[sku] {
			t.Errorf("stock row %s missing", sku)
		}
	}
	t.Logf("%d orders: %d approved, %d cancelled", len(final), approved, len(final)-approved)
}

// workload makes n orders: most on plentiful SKUs, every 7th with a
// declined card, every 11th on a scarce SKU, every 13th on an unknown SKU.
func workload(prefix string, n int) ([]orderReq, map[string]int64) {
	stock := map[string]int64{"sku-1": int64(n) * 3, "sku-2": int64(n) * 3, "sku-3": int64(n) * 3, "sku-scarce": int64(n / 20)}
	var out []orderReq
	for i := 0; i < n; i++ {
		r := orderReq{Key: fmt.Sprintf("%s-%d", prefix, i), Customer: fmt.Sprintf("c-%d", i%17), Card: "tok_visa", Total: int64(1000 + i)}
		r.Items = []models.Item{{SKU: fmt.Sprintf("sku-%d", 1+i%3), Qty: 1 + i%2}}
		if i%5 == 0 {
			r.Items = append(r.Items, models.Item{SKU: "sku-1", Qty: 1})
		}
		switch {
		case i%7 == 3:
			r.Card = "tok_decline_insufficient"
		case i%11 == 5:
			r.Items = []models.Item{{SKU: "sku-scarce", Qty: 2}}
		case i%13 == 6:
			r.Items = []models.Item{{SKU: "sku-unknown", Qty: 1}}
		}
		out = append(out, r)
	}
	return out, stock
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
