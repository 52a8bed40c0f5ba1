package workload

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Behaviours the fake orders API can be told to show for one attempt of a
// key. Those that end in "created" apply the order before misbehaving, as a
// real server that dies between commit and answer does.
const (
	bOK          = "ok"           // normal: create (or replay) and answer 202
	bBadRequest  = "400"          // refuse with 400 bad_request; nothing created
	bUnavailable = "503"          // refuse with 503 unavailable; nothing created
	b500Created  = "500-created"  // create, then answer 500
	bResetBefore = "reset-before" // reset the connection without creating
	bResetAfter  = "reset-after"  // create, then reset the connection
	bHangCreated = "hang-created" // create, then never answer
	bProxy404    = "proxy-404"    // 404 with a non-JSON body (something in between)
	b2xxNoID     = "2xx-noid"     // 200 with a body that names no order
)

// fakeOrders is the peer of the driver: an in-memory workload API with
// idempotency keys whose misbehaviour is scripted per key and attempt.
type fakeOrders struct {
	t      testing.TB
	mu     sync.Mutex
	script map[string][]string // key → behaviour of the 1st, 2nd, … request (then bOK)
	seen   map[string]int      // key → requests received
	orders map[string]string   // key → order id
	bodies map[string]string   // key → first body
	next   int
}

func newFakeOrders(t testing.TB, script map[string][]string) (*fakeOrders, *httptest.Server) {
	f := &fakeOrders{t: t, script: script, seen: map[string]int{}, orders: map[string]string{}, bodies: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeOrders) requests(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

func (f *fakeOrders) created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.orders)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/orders" {
		writeJSON(w, http.StatusNotFound, map[string]string{"code": "not_found", "error": r.URL.Path})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen[key]++
	n := f.seen[key]
	beh := bOK
	if s := f.script[key]; n <= len(s) {
		beh = s[n-1]
	}
	create := func() (id string, replayed bool) {
		if id, ok := f.orders[key]; ok {
			return id, true
		}
		f.next++
		id = fmt.Sprintf("o-%d", f.next)
		f.orders[key] = id
		f.bodies[key] = string(body)
		return id, false
	}
	switch beh {
	case bOK:
		if first, ok := f.bodies[key]; ok && first != string(body) {
			f.mu.Unlock()
			writeJSON(w, http.StatusConflict, map[string]string{"code": "idempotency_key_reused", "error": "other body"})
			return
		}
		id, replayed := create()
		f.mu.Unlock()
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": "PENDING"})
	case bBadRequest:
		f.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"code": "bad_request", "error": "no items"})
	case bUnavailable:
		f.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "error": "database down"})
	case b500Created:
		create()
		f.mu.Unlock()
		writeJSON(w, http.StatusInternalServerError, map[string]string{"code": "internal", "error": "commit ack lost"})
	case bResetBefore, bResetAfter:
		if beh == bResetAfter {
			create()
		}
		f.mu.Unlock()
		reset(f.t, w)
	case bHangCreated:
		create()
		f.mu.Unlock()
		<-r.Context().Done() // until the client gives up
	case bProxy404:
		f.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html>no route</html>")
	case b2xxNoID:
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"status": "PENDING"})
	default:
		f.mu.Unlock()
		f.t.Errorf("fake orders: unknown behaviour %q", beh)
	}
}

// reset drops the connection with a TCP RST, as a crashing server or a
// reset_peer toxic does.
func reset(t testing.TB, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
