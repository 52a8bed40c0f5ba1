package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/sagachaos/sagachaos/models"
)

// Ambiguity modes: the effect is applied, then the caller is answered with a
// failure (AmbiguousError) or never answered (AmbiguousHang). These are the
// values of the Ambiguous field of the effect types in models.
const (
	AmbiguousError = "500"
	AmbiguousHang  = "hang"
)

// HeaderIdempotencyKey is the request header that makes a call idempotent.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderReplayed marks an answer served from the idempotency store.
const HeaderReplayed = "Idempotent-Replayed"

// Refusal is the value of the Info op a service records for a call it
// refused without acting (bad request, idempotency conflict). It is not an
// effect: nothing happened in the world.
type Refusal struct {
	Status         int    `json:"status"`
	Code           string `json:"code"`
	Error          string `json:"error"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// answer is an HTTP answer as stored for idempotent replays.
type answer struct {
	status int
	body   []byte
}

// outcome is what applying one request did.
type outcome struct {
	order  string
	effect replayable // the Effect op value
	answer answer
}

// replayable is an effect value that can describe its own replay.
type replayable interface {
	replay() replayable
}

// request is a parsed, valid request, ready to be applied.
type request interface {
	orderID() string
	// ambiguity is the mode the request's content asks for ("" for none):
	// its outcome field holding an ambiguous token.
	ambiguity() string
	// apply performs the effect; called with the service's lock held.
	apply(amb, key string) outcome
}

// idemEntry is one Idempotency-Key's record.
type idemEntry struct {
	fingerprint string // method, path and canonical body
	done        bool
	order       string
	answer      answer
	effect      replayable // the replay value to record on a repeat
}

// service is the HTTP plumbing and idempotency store every provider has.
type service struct {
	name string // the provider's name
	proc string // its effects' Proc, models.ProcWorldPrefix + name
	rec  *models.Recorder
	log  *slog.Logger

	// beforeApply, when set, runs after a keyed request is marked in
	// progress and before it is applied (tests use it to hold a request).
	beforeApply func(f string)

	mu       sync.Mutex // guards keys, inject and the owner's state
	keys     map[string]*idemEntry
	injected map[string][]injection // by action (op function), consumed in order
	closing  chan struct{}
	closed   bool
	inflight sync.WaitGroup // requests being served, hanging ones included
	ln       net.Listener
	srv      *http.Server
	mux      *http.ServeMux
	serveErr chan error
}

func newService(name, proc string, rec *models.Recorder, o *options) *service {
	return &service{
		name:        name,
		proc:        proc,
		rec:         rec,
		log:         o.logger.With("world", name),
		beforeApply: o.beforeApply,
		keys:        map[string]*idemEntry{},
		injected:    map[string][]injection{},
		closing:     make(chan struct{}),
		mux:         http.NewServeMux(),
		serveErr:    make(chan error, 1),
	}
}

func (s *service) start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("world %s: listen on 127.0.0.1: %w", s.name, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.mux, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return nil
}

// addr is host:port of the listener.
func (s *service) addr() string { return s.ln.Addr().String() }

// close stops the server, drops held connections and waits for them.
func (s *service) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	err := s.srv.Close()
	// Wait for the requests in flight, so that no effect is recorded
	// after Close returns (the observer reads the history next).
	s.inflight.Wait()
	if serr := <-s.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("world %s: close: %w", s.name, err)
	}
	return nil
}

// injection is a pending nemesis order: the next left requests are
// ambiguous in mode.
type injection struct {
	mode string
	left int
}

// inject makes the next n new requests of function f ambiguous in mode.
func (s *service) inject(f, mode string, n int) error {
	if mode != AmbiguousError && mode != AmbiguousHang {
		return fmt.Errorf("world %s: ambiguity mode %q: want %q or %q", s.name, mode, AmbiguousError, AmbiguousHang)
	}
	if n < 0 {
		return fmt.Errorf("world %s: ambiguity count %d is negative", s.name, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Injections queue: a later one must not erase one still pending (two
	// planned faults are two faults).
	if n > 0 {
		s.injected[f] = append(s.injected[f], injection{mode: mode, left: n})
	}
	return nil
}

// takeInjected consumes one injected ambiguity for f; caller holds s.mu.
func (s *service) takeInjected(f string) string {
	q := s.injected[f]
	if len(q) == 0 {
		return ""
	}
	mode := q[0].mode
	q[0].left--
	if q[0].left == 0 {
		q = q[1:]
	}
	s.injected[f] = q
	return mode
}

// handle registers an effectful POST endpoint: f is the op function,
// parse validates the body.
func (s *service) handle(pattern, f, sagaField string, parse func(body []byte) (request, error)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			writeJSON(w, http.StatusServiceUnavailable, errBody{Code: "unavailable", Error: "the " + s.name + " is shutting down"})
			return
		}
		s.inflight.Add(1)
		s.mu.Unlock()
		defer s.inflight.Done()
		s.serve(w, r, f, sagaField, parse)
	})
}

func (s *service) serve(w http.ResponseWriter, r *http.Request, f, sagaField string, parse func([]byte) (request, error)) {
	key := r.Header.Get(HeaderIdempotencyKey)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		s.refuse(w, f, "", key, http.StatusBadRequest, "bad_request", fmt.Sprintf("read body: %v", err))
		return
	}
	canon, err := canonical(body)
	if err != nil {
		s.refuse(w, f, "", key, http.StatusBadRequest, "bad_request", fmt.Sprintf("body is not JSON: %v", err))
		return
	}
	req, err := parse(body)
	if err != nil {
		s.refuse(w, f, sagaOf(body, sagaField), key, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	fp := r.Method + " " + r.URL.Path + " " + canon

	s.mu.Lock()
	var entry *idemEntry
	if key != "" {
		if e, ok := s.keys[key]; ok {
			switch {
			case e.fingerprint != fp:
				s.mu.Unlock()
				s.refuse(w, f, req.orderID(), key, http.StatusConflict, "idempotency_key_reused",
					"this Idempotency-Key was used with another request")
				return
			case !e.done:
				s.mu.Unlock()
				s.refuse(w, f, req.orderID(), key, http.StatusConflict, "idempotency_in_progress",
					"a request with this Idempotency-Key is still being processed; retry later")
				return
			}
			s.rec.Record(s.proc, models.Effect, f, e.order, e.effect)
			a := e.answer
			s.mu.Unlock()
			w.Header().Set(HeaderReplayed, "true")
			writeRaw(w, a)
			return
		}
		entry = &idemEntry{fingerprint: fp}
		s.keys[key] = entry
		if s.beforeApply != nil {
			s.mu.Unlock()
			s.beforeApply(f)
			s.mu.Lock()
		}
	}
	amb := s.takeInjected(f)
	if amb == "" {
		amb = req.ambiguity()
	}
	out := req.apply(amb, key)
	s.rec.Record(s.proc, models.Effect, f, out.order, out.effect)
	if entry != nil {
		entry.done = true
		entry.order = out.order
		entry.answer = out.answer
		entry.effect = out.effect.replay()
	}
	s.mu.Unlock()

	switch amb {
	case AmbiguousError:
		writeJSON(w, http.StatusInternalServerError, errBody{Code: "internal_error", Error: "the " + s.name + " failed while processing the request"})
	case AmbiguousHang:
		s.hang(w)
	default:
		writeRaw(w, out.answer)
	}
}

// hang holds the connection without answering until the caller closes it
// or the service closes.
func (s *service) hang(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// Not reachable with net/http's HTTP/1 server; fall back to a
		// server error rather than pretend to hang.
		writeJSON(w, http.StatusInternalServerError, errBody{Code: "internal_error", Error: "cannot hold connection"})
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		s.log.Warn("hijack for hang", "err", err)
		return
	}
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, conn) // returns when the caller hangs up or we close conn
		close(gone)
	}()
	select {
	case <-gone:
	case <-s.closing:
	}
	conn.Close()
	<-gone
}

// refuse answers an error without acting and records it as an Info op.
func (s *service) refuse(w http.ResponseWriter, f, order, key string, status int, code, msg string) {
	s.rec.Record(s.proc, models.Info, f, order, Refusal{Status: status, Code: code, Error: msg, IdempotencyKey: key})
	writeJSON(w, status, errBody{Code: code, Error: msg})
}

type errBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, answer{status: status, body: b})
}

func writeRaw(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	w.Write(a.body) // a.body is shared by every replay: never append to it
	w.Write([]byte{'\n'})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("world: marshal %T: %v", v, err))
	}
	return b
}

// canonical re-encodes a JSON body so that key order and spacing do not make
// two equal requests look different.
func canonical(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if dec.More() {
		return "", errors.New("trailing data after the JSON value")
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// sagaOf extracts the saga field from a body that failed validation, for
// the refusal op.
func sagaOf(body []byte, field string) string {
	var v map[string]any
	_ = json.Unmarshal(body, &v)
	s, _ := v[field].(string)
	return s
}
