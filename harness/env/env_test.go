package env

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

var testDBs = []string{"orders", "inventory", "payment", "delivery"}

func upTestEnv(t *testing.T, ctx context.Context) *Env {
	t.Helper()
	e, err := Up(ctx, Config{
		Dir:       t.TempDir(),
		Databases: testDBs,
		Topics:    []Topic{{Name: "events", Partitions: 3}},
	})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	dataDir, shmID := "", -1
	if p, ok := e.pg.(*localPG); ok {
		dataDir, shmID = p.dataDir, sysvShmID(p.dataDir)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if dataDir != "" {
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("data dir %s left after Close: %v", dataDir, err)
			}
		}
		if shmID >= 0 {
			if _, err := unix.SysvShmCtl(shmID, unix.IPC_STAT, &unix.SysvShmDesc{}); err == nil {
				t.Errorf("System V segment %d left after Close", shmID)
			}
		}
		if e.Link("orders→postgres") != nil || len(e.Links()) != 0 {
			t.Errorf("links left after Close: %d", len(e.Links()))
		}
	})
	return e
}

// eventually polls fn until it succeeds; the deadline only bounds a hang,
// it asserts nothing about speed.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func kafkaClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.DialTimeout(time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestEnvLinksAndCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := upTestEnv(t, ctx)

	t.Run("postgres through per-component links", func(t *testing.T) {
		dsnA, err := e.ProxiedDSN("orders", "orders")
		if err != nil {
			t.Fatal(err)
		}
		dsnB, err := e.ProxiedDSN("inventory", "orders")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(dsnA, e.PostgresAddr()) {
			t.Fatalf("proxied DSN %s points at the server directly", dsnA)
		}
		a, err := pgxpool.New(ctx, dsnA)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := pgxpool.New(ctx, dsnB)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := a.Exec(ctx, "CREATE TABLE kv (k text PRIMARY KEY, v text)"); err != nil {
			t.Fatalf("create through link: %v", err)
		}
		if _, err := a.Exec(ctx, "INSERT INTO kv VALUES ('a', '1')"); err != nil {
			t.Fatalf("insert through link: %v", err)
		}
		var v string
		if err := b.QueryRow(ctx, "SELECT v FROM kv WHERE k='a'").Scan(&v); err != nil || v != "1" {
			t.Fatalf("read through other link: v=%q err=%v", v, err)
		}

		la := e.Link("orders→postgres")
		if la == nil {
			t.Fatal("link orders→postgres not registered")
		}
		if err := la.Down(); err != nil {
			t.Fatal(err)
		}
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = a.Exec(qctx, "INSERT INTO kv VALUES ('b', '2')")
		qcancel()
		if err == nil {
			t.Fatal("insert succeeded through a cut link")
		}
		t.Logf("cut orders→postgres: %v", err)
		if _, err := b.Exec(ctx, "INSERT INTO kv VALUES ('c', '3')"); err != nil {
			t.Fatalf("inventory→postgres should be unaffected by cutting orders→postgres: %v", err)
		}
		if err := e.HealAll(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "postgres after heal", func() error {
			_, err := a.Exec(ctx, "INSERT INTO kv VALUES ('d', '4') ON CONFLICT DO NOTHING")
			return err
		})
	})

	t.Run("kafka through per-component links", func(t *testing.T) {
		topic := e.TopicName("events")
		b1, err := e.KafkaBrokersFor("relay-1")
		if err != nil {
			t.Fatal(err)
		}
		b2, err := e.KafkaBrokersFor("relay-2")
		if err != nil {
			t.Fatal(err)
		}
		bc, err := e.KafkaBrokersFor("consumer")
		if err != nil {
			t.Fatal(err)
		}
		if b1[0] == b2[0] || b1[0] == e.DirectBrokers()[0] {
			t.Fatalf("relay-1 %v, relay-2 %v, direct %v: want distinct addresses", b1, b2, e.DirectBrokers())
		}
		noIdem := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(time.Second)}
		p1 := kafkaClient(t, b1, noIdem...)
		p2 := kafkaClient(t, b2, noIdem...)
		produce := func(p *kgo.Client, key, val string) error {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			defer pcancel()
			return p.ProduceSync(pctx, &kgo.Record{Key: []byte(key), Value: []byte(val)}).FirstErr()
		}
		// Every broker address the cluster advertises to relay-1 must be
		// relay-1's own link, and the direct address to the observer.
		for _, tc := range []struct {
			name    string
			brokers []string
		}{{"relay-1", b1}, {"relay-2", b2}, {"direct", e.DirectBrokers()}} {
			md, err := kadm.NewClient(kafkaClient(t, tc.brokers)).BrokerMetadata(ctx)
			if err != nil {
				t.Fatalf("%s metadata: %v", tc.name, err)
			}
			for _, b := range md.Brokers {
				if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != tc.brokers[0] {
					t.Errorf("%s: broker %d advertised as %s, want %s", tc.name, b.NodeID, got, tc.brokers[0])
				}
			}
		}
		if err := produce(p1, "o-1", "r1-before"); err != nil {
			t.Fatalf("produce via relay-1→kafka: %v", err)
		}
		if err := produce(p2, "o-2", "r2-before"); err != nil {
			t.Fatalf("produce via relay-2→kafka: %v", err)
		}

		// Cutting relay-1's link stops relay-1 (which proves its traffic
		// really crosses the link, advertised address included) and
		// nobody else.
		l1 := e.Link("relay-1→kafka")
		if err := l1.Down(); err != nil {
			t.Fatal(err)
		}
		if err := produce(p1, "o-1", "r1-during-cut"); err == nil {
			t.Fatal("relay-1 produced through a cut link: its traffic bypasses relay-1→kafka")
		} else {
			t.Logf("cut relay-1→kafka: %v", err)
		}
		if err := produce(p2, "o-2", "r2-during-cut"); err != nil {
			t.Fatalf("relay-2 should be unaffected by cutting relay-1→kafka: %v", err)
		}
		if err := l1.Heal(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "relay-1 produce after heal", func() error { return produce(p1, "o-1", "r1-after") })

		// Consume everything through the consumer's own link, as a group.
		c := kafkaClient(t, bc, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
		want := map[string]bool{"r1-before": true, "r2-before": true, "r2-during-cut": true, "r1-after": true}
		got := map[string]bool{}
		eventually(t, "consume all", func() error {
			fctx, fcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer fcancel()
			c.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
			for w := range want {
				if !got[w] {
					return fmt.Errorf("missing %q (have %v)", w, got)
				}
			}
			return nil
		})
		if got["r1-during-cut"] {
			t.Error("a record produced while relay-1→kafka was cut reached the broker")
		}
		if err := c.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit offsets through consumer→kafka: %v", err)
		}
	})

	t.Run("generic http link and toxics", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		defer srv.Close()
		l, err := e.NewLink("client→orders", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		get := func() error {
			resp, err := hc.Get("http://" + l.Listen() + "/")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "ok" {
				return fmt.Errorf("body %q", b)
			}
			return nil
		}
		if err := get(); err != nil {
			t.Fatalf("GET through link: %v", err)
		}
		if err := l.Down(); err != nil {
			t.Fatal(err)
		}
		if err := get(); err == nil {
			t.Fatal("GET succeeded through a cut link")
		}
		if err := l.Up(); err != nil {
			t.Fatal(err)
		}
		if err := get(); err != nil {
			t.Fatalf("GET after Up on the same port: %v", err)
		}
		if err := l.AddToxic("blackhole", "timeout", "upstream", map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
		if err := get(); err == nil {
			t.Fatal("GET succeeded through a timeout (blackhole) toxic")
		}
		if err := e.HealAll(); err != nil {
			t.Fatal(err)
		}
		if err := get(); err != nil {
			t.Fatalf("GET after HealAll: %v", err)
		}
		var sb strings.Builder
		e.Describe(&sb)
		for _, name := range []string{"client→orders", "orders→postgres", "relay-1→kafka", "db orders"} {
			if !strings.Contains(sb.String(), name) {
				t.Errorf("Describe lacks %q:\n%s", name, sb.String())
			}
		}
	})

	t.Run("crash restart keeps every acknowledged commit", func(t *testing.T) {
		crashKeepsAcked(t, ctx, e)
	})
}

// crashKeepsAcked writes from 8 clients through a link, crashes and
// restarts PostgreSQL under them (whatever the provider does for a crash:
// SIGKILL of the local postmaster, `docker kill` of a container), and finds
// every acknowledged insert in the table afterwards.
func crashKeepsAcked(t *testing.T, ctx context.Context, e *Env) {
	t.Helper()
	dsn, err := e.ProxiedDSN("payment", "payment")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE acked (id int PRIMARY KEY, writer int)"); err != nil {
		t.Fatal(err)
	}
	const target, writers = 200, 8
	var (
		mu      sync.Mutex
		acked   []int
		failed  atomic.Int64
		next    atomic.Int64
		crashed = make(chan struct{})
	)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				id := int(next.Add(1))
				ictx, icancel := context.WithTimeout(wctx, 2*time.Second)
				_, err := pool.Exec(ictx, "INSERT INTO acked VALUES ($1, $2)", id, w)
				icancel()
				if err != nil {
					failed.Add(1) // outcome unknown: may or may not be there
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, id)
				n := len(acked)
				mu.Unlock()
				select {
				case <-crashed:
					if n >= target {
						wcancel()
					}
				default:
				}
			}
		}()
	}
	eventually(t, "100 acked before the crash", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < target/2 {
			return fmt.Errorf("%d acked", len(acked))
		}
		return nil
	})
	oldPID := e.PostgresPID()
	if err := e.CrashPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.RestartPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	if oldPID != 0 && e.PostgresPID() == oldPID {
		t.Fatalf("postmaster pid %d unchanged after crash+restart", oldPID)
	}
	close(crashed)
	wg.Wait()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("test deadline hit before writers finished")
	}
	obs, err := pgxpool.New(ctx, e.DirectDSN("payment"))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	present := map[int]bool{}
	rows, err := obs.Query(ctx, "SELECT id FROM acked")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		present[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var lost []int
	for _, id := range acked {
		if !present[id] {
			lost = append(lost, id)
		}
	}
	t.Logf("acked %d, failed-or-unknown %d, rows present %d", len(acked), failed.Load(), len(present))
	if len(acked) < target {
		t.Fatalf("only %d acked", len(acked))
	}
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged commits lost after crash-restart: %v", len(lost), lost)
	}
}

func pingDSN(ctx context.Context, dsn string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }
