// Package workload is the client side of a run: it starts the sagas of a
// scenarios.Workload against a target's workload API, as the manifest's
// workload declares it (models.Workload: method, path, Idempotency-Key
// header, where the id is in the answer; docs/target-contract.md), and
// records every attempt in the history as invoke (the key and the body as
// sent) followed by ok (the saga's id), fail or info.
//
// The one rule it never breaks: an attempt whose effect is uncertain (a
// timeout, a dropped connection, a 5xx, a cancelled context) is recorded as
// info, never as fail, because the saga may exist. Checkers settle such ops
// from the final state.
package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Defaults a Driver uses unless an Option overrides them.
const (
	DefaultTimeout = 5 * time.Second
	DefaultBackoff = 50 * time.Millisecond
	// maxBody bounds how much of a reply is read; the workload API answers
	// with small JSON, anything larger is not an answer we can trust.
	maxBody = 1 << 20
)

// Driver starts sagas and records them. It is safe to call Invoked and
// Subscribe from other goroutines while Run is running (the nemesis does).
type Driver struct {
	rec      *models.Recorder
	base     string
	client   *http.Client
	timeout  time.Duration
	backoff  time.Duration
	log      *slog.Logger
	onInvoke func(n int64)
	spec     models.Workload

	invoked atomic.Int64
	mu      sync.Mutex
	waiters []waiter
	ids     []string // acknowledged saga ids, in order of first ack
	idSeen  map[string]bool
}

type waiter struct {
	n  int64
	ch chan struct{}
}

// Option configures a Driver.
type Option func(*Driver)

// WithTimeout bounds one HTTP request (default DefaultTimeout); pass the
// scenario's Limits.ClientTimeout. A request that runs past it is recorded
// as info.
func WithTimeout(d time.Duration) Option { return func(dr *Driver) { dr.timeout = d } }

// WithHTTPClient replaces the driver's HTTP client (default: a client with
// its own transport, so Run can close its connections when it ends). The
// per-request bound is WithTimeout's, applied through the request context.
func WithHTTPClient(c *http.Client) Option { return func(dr *Driver) { dr.client = c } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(dr *Driver) { dr.log = l } }

// WithRetryBackoff sets the pause before retrying an unknown outcome
// (default DefaultBackoff; the k-th retry waits k times it).
func WithRetryBackoff(d time.Duration) Option { return func(dr *Driver) { dr.backoff = d } }

// WithSpec sets the workload declaration the driver follows (default: POST
// /sagas, op FStartSaga, the id at /id).
func WithSpec(w models.Workload) Option { return func(dr *Driver) { dr.spec = w } }

// OnInvoke registers a hook called with the new Invoked() count right after
// each order's first invoke op is recorded. It runs on the client goroutine:
// keep it short.
func OnInvoke(f func(n int64)) Option { return func(dr *Driver) { dr.onInvoke = f } }

// New returns a driver that records into rec and sends requests to baseURL
// (the target's API address, normally through the client→orders link).
func New(rec *models.Recorder, baseURL string, opts ...Option) *Driver {
	d := &Driver{
		rec:     rec,
		base:    strings.TrimRight(baseURL, "/"),
		timeout: DefaultTimeout,
		backoff: DefaultBackoff,
		log:     slog.Default(),
		spec:    models.Workload{Start: models.StartSpec{Path: "/sagas"}},
		idSeen:  map[string]bool{},
	}
	for _, o := range opts {
		o(d)
	}
	if d.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// One kept connection per client goroutine: the default of 2 makes
		// a busy run open (and leave in TIME_WAIT) a socket per request.
		tr.MaxIdleConnsPerHost = 256
		d.client = &http.Client{Transport: tr}
	}
	return d
}

// Invoked is the number of sagas whose first attempt has been recorded.
// Retries and duplicate submissions do not count: fault triggers count
// sagas, so a seed replays the same way whatever the outcomes.
func (d *Driver) Invoked() int64 { return d.invoked.Load() }

// Subscribe returns a channel that is closed once Invoked() >= n (at once
// if it already is). A channel for an n never reached stays open; callers
// select on it together with their context.
func (d *Driver) Subscribe(n int) <-chan struct{} {
	ch := make(chan struct{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.invoked.Load() >= int64(n) {
		close(ch)
		return ch
	}
	d.waiters = append(d.waiters, waiter{n: int64(n), ch: ch})
	return ch
}

// countInvoke bumps the counter and wakes the subscribers it satisfies.
func (d *Driver) countInvoke() {
	d.mu.Lock()
	n := d.invoked.Add(1)
	kept := d.waiters[:0]
	for _, w := range d.waiters {
		if n >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	d.waiters = kept
	d.mu.Unlock()
	if d.onInvoke != nil {
		d.onInvoke(n)
	}
}

// IDs returns the saga ids the target acknowledged so far, in order of
// first acknowledgement.
func (d *Driver) IDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ids...)
}

// Run starts every saga of w: w.Clients goroutines named client-0…, each
// placing its own orders (OrderPlan.Client) in plan order, pausing Gap
// before each. It returns when every client is done (nil) or when ctx ends
// (ctx's error); in-flight requests are then recorded as info.
func (d *Driver) Run(ctx context.Context, w scenarios.Workload) error {
	clients := w.Clients
	if clients < 1 {
		clients = 1
	}
	plans := make([][]scenarios.SagaPlan, clients)
	for _, o := range w.Sagas {
		if o.Client < 0 || o.Client >= clients {
			return fmt.Errorf("workload: saga %q is for client %d, but the workload has %d clients", o.Key, o.Client, clients)
		}
		plans[o.Client] = append(plans[o.Client], o)
	}
	if tr, ok := d.client.Transport.(interface{ CloseIdleConnections() }); ok {
		defer tr.CloseIdleConnections()
	}
	var wg sync.WaitGroup
	for c := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.runClient(ctx, fmt.Sprintf("%s%d", models.ProcClientPfx, c), plans[c])
		}()
	}
	wg.Wait()
	d.log.Info("workload done", "sagas", len(w.Sagas), "invoked", d.Invoked(), "interrupted", ctx.Err() != nil)
	return ctx.Err()
}

// runClient starts one client's sagas in plan order: each waits for the
// previous ones to be answered, unless it is Parallel (a burst that does
// not wait).
func (d *Driver) runClient(ctx context.Context, proc string, orders []scenarios.SagaPlan) {
	ln := &lanes{base: proc}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, o := range orders {
		if !o.Parallel {
			wg.Wait()
		}
		if !sleep(ctx, o.Gap.D()) {
			return
		}
		wg.Go(func() { d.placeOrder(ctx, ln, o) })
	}
}

// lanes names the concurrent requests of one client: lane 0 is the
// client's own process ("client-3"), each request sent while another of
// the client's is in flight gets the lowest free lane ("client-3.1"), so
// every process of the history has at most one request open, as invoke
// and completion pairing requires.
type lanes struct {
	base string
	mu   sync.Mutex
	busy []bool
}

func (l *lanes) acquire() (string, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.busy) && l.busy[i] {
		i++
	}
	if i == len(l.busy) {
		l.busy = append(l.busy, false)
	}
	l.busy[i] = true
	name := l.base
	if i > 0 {
		name = fmt.Sprintf("%s.%d", l.base, i)
	}
	return name, func() {
		l.mu.Lock()
		l.busy[i] = false
		l.mu.Unlock()
	}
}

// placeOrder sends one saga's start requests: its submissions one after the
// other, each retried on an unknown outcome up to RetryUnknown times (the
// budget is per submission: a double click is a second, independent user
// action); Concurrent more copies of the first submission at the same
// instant; and a duplicate DuplicateAfter after the first, answered or not.
// Every request carries the saga's key. It reports false when ctx ended.
func (d *Driver) placeOrder(ctx context.Context, ln *lanes, o scenarios.SagaPlan) bool {
	subs := max(o.Submissions, 1)
	var attempts atomic.Int64
	var wg sync.WaitGroup
	send := func() bool {
		proc, release := ln.acquire()
		defer release()
		return d.submit(ctx, proc, o, &attempts)
	}
	if o.DuplicateAfter > 0 {
		wg.Go(func() {
			if sleep(ctx, o.DuplicateAfter.D()) {
				send()
			}
		})
	}
	ok := true
	for s := 0; s < subs && ok; s++ {
		if s == 0 {
			for range o.Concurrent {
				wg.Go(func() { send() })
			}
		}
		ok = send()
	}
	wg.Wait()
	return ok && ctx.Err() == nil
}

// submit sends one submission and retries it after an unknown outcome. It
// reports false when ctx ended.
func (d *Driver) submit(ctx context.Context, proc string, o scenarios.SagaPlan, attempts *atomic.Int64) bool {
	for retry := 0; ; retry++ {
		if ctx.Err() != nil {
			return false
		}
		typ := d.attempt(ctx, proc, o, int(attempts.Add(1)))
		if typ != models.Info || retry >= o.RetryUnknown {
			return true
		}
		if !sleep(ctx, d.retryWait(o, retry+1)) {
			return false
		}
	}
}

// retryWait is the pause before the k-th retry: k times the backoff, or,
// with a RetrySpread, k/(1+2+…+R) of the spread, so the R retries end
// about RetrySpread after the first attempt failed.
func (d *Driver) retryWait(o scenarios.SagaPlan, k int) time.Duration {
	if o.RetrySpread <= 0 || o.RetryUnknown < 1 {
		return time.Duration(k) * d.backoff
	}
	r := o.RetryUnknown
	return time.Duration(int64(o.RetrySpread) * int64(k) / int64(r*(r+1)/2))
}

// errorReply is the error body of the workload API.
type errorReply struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// attempt sends one request and records invoke and its completion. It
// returns the completion's type.
func (d *Driver) attempt(ctx context.Context, proc string, o scenarios.SagaPlan, attempt int) models.OpType {
	body := o.Body
	if len(body) == 0 {
		body = json.RawMessage("{}")
	}
	f := d.spec.OpName()
	d.rec.Record(proc, models.Invoke, f, "", models.StartSaga{Key: o.Key, Attempt: attempt, Body: body})
	if attempt == 1 {
		d.countInvoke()
	}
	info := func(status int, code, msg string) models.OpType {
		d.log.Debug("start outcome unknown", "proc", proc, "key", o.Key, "attempt", attempt, "status", status, "err", msg)
		d.rec.Record(proc, models.Info, f, "", models.ClientFailure{Key: o.Key, Status: status, Code: code, Error: msg})
		return models.Info
	}

	rctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	method := d.spec.Start.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(rctx, method, d.base+d.spec.Start.Path, bytes.NewReader(body))
	if err != nil {
		return info(0, "", fmt.Sprintf("build request: %v", err))
	}
	req.Header.Set("Content-Type", "application/json")
	keyHeader := d.spec.Start.KeyHeader
	if keyHeader == "" {
		keyHeader = "Idempotency-Key"
	}
	req.Header.Set(keyHeader, o.Key)
	// net/http silently re-sends a request that carries an Idempotency-Key
	// when a reused connection breaks. Without GetBody it cannot, so every
	// send the target sees is an attempt the history shows.
	req.GetBody = nil

	resp, err := d.client.Do(req)
	if err != nil {
		return info(0, "", unknownOutcome(ctx, rctx, err))
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	st := resp.StatusCode
	switch {
	case st >= 200 && st < 300:
		if rerr != nil {
			return info(st, "", fmt.Sprintf("read %d reply: %s", st, unknownOutcome(ctx, rctx, rerr)))
		}
		id := d.answerID(raw)
		if id == "" {
			// Accepted, but we cannot say which saga: unknown, not ok.
			return info(st, "", fmt.Sprintf("%d reply without a saga id at %q: %q", st, d.idPointer(), truncate(raw)))
		}
		d.rec.Record(proc, models.Ok, f, id, models.PlaceOrderReply{
			Key: o.Key, Status: st, Order: id, Replayed: strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true"),
		})
		d.mu.Lock()
		if !d.idSeen[id] {
			d.idSeen[id] = true
			d.ids = append(d.ids, id)
		}
		d.mu.Unlock()
		return models.Ok
	case st >= 400 && st < 500:
		var e errorReply
		if rerr == nil && json.Unmarshal(raw, &e) == nil && e.Code != "" {
			d.rec.Record(proc, models.Fail, f, "", models.ClientFailure{Key: o.Key, Status: st, Code: e.Code, Error: e.Error})
			return models.Fail
		}
		// A 4xx without the API's error shape may come from something in
		// between (a proxy); we cannot be sure the target refused.
		return info(st, "", fmt.Sprintf("%d without an error code: %q", st, truncate(raw)))
	default:
		var e errorReply
		_ = json.Unmarshal(raw, &e)
		msg := e.Error
		if msg == "" {
			msg = fmt.Sprintf("%d: %q", st, truncate(raw))
		}
		return info(st, e.Code, msg)
	}
}

func (d *Driver) idPointer() string {
	if d.spec.Start.ID == "" {
		return "/id"
	}
	return d.spec.Start.ID
}

// answerID reads the saga id from a 2xx answer: a string, or a number
// written in decimal.
func (d *Driver) answerID(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	x, ok := models.Pointer(v, d.idPointer())
	if !ok {
		return ""
	}
	switch id := x.(type) {
	case string:
		return id
	case json.Number:
		return id.String()
	}
	return ""
}

// unknownOutcome describes a transport error, saying which deadline ended
// the request when one did.
func unknownOutcome(ctx, rctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return fmt.Sprintf("run interrupted mid-request: %v", err)
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("client timeout: %v", err)
	}
	return err.Error()
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
