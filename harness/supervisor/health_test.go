package supervisor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// maxHealthMessage bounds the health-timeout message: it ends up on one
// terminal line (issue 10 item 13 measured 1.6k characters).
const maxHealthMessage = 600

// The health-timeout message says the last real answer — a status, or why
// the connection failed — not the "context deadline exceeded" of the probe
// the deadline cut short, on one line of bounded length, with where the log
// is and its last line.
func TestHealthTimeoutSaysTheLastAnswer(t *testing.T) {
	// A health endpoint that answers 503 with a reason, slowly enough that
	// the deadline usually lands while a probe is in flight.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "database not ready\nsecond line of the body")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	longLine := strings.Repeat("x", 2000)
	cases := []struct {
		name  string
		url   string
		wants []string
	}{
		{"503", "http://" + ln.Addr().String() + "/health", []string{"503 Service Unavailable", "database not ready"}},
		{"connection refused", fmt.Sprintf("http://127.0.0.1:%d/health", freePort(t)), []string{"connection refused"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sup := newSup(t)
			dir := t.TempDir()
			p, err := sup.Start(context.Background(), Spec{
				Name: "orders", LogDir: dir, HealthURL: c.url,
				Command: []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo " + longLine + "; done; echo 'waiting for postgres'; exec sleep 1000"},
			})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "the log is written", func() bool { return strings.Contains(p.LastLogLines(1), "waiting for postgres") })
			err = sup.WaitHealthy(context.Background(), p, 300*time.Millisecond)
			if err == nil {
				t.Fatal("WaitHealthy succeeded")
			}
			msg := err.Error()
			t.Logf("message (%d chars): %s", len(msg), msg)
			wants := append([]string{"orders not healthy after 300ms", "last answer", c.url, dir, "waiting for postgres"}, c.wants...)
			for _, w := range wants {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q", w)
				}
			}
			for _, bad := range []string{"context deadline exceeded", "second line of the body", "\n"} {
				if strings.Contains(msg, bad) {
					t.Errorf("message holds %q", bad)
				}
			}
			if len(msg) > maxHealthMessage {
				t.Errorf("message is %d characters, want at most %d", len(msg), maxHealthMessage)
			}
		})
	}
}
