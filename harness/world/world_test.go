package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

func startWorld(t *testing.T, opts ...Option) (*World, *models.Recorder) {
	t.Helper()
	rec, err := models.NewRecorder(nil, models.Header{Run: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Start(context.Background(), rec, targets.OrderDomain().World, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close world: %v", err)
		}
	})
	return w, rec
}

type reply struct {
	status   int
	replayed bool
	body     map[string]any
	err      error
}

func (r reply) str(k string) string { s, _ := r.body[k].(string); return s }

func post(ctx context.Context, client *http.Client, url, key, body string) reply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return reply{err: err}
	}
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, replayed: resp.Header.Get(HeaderReplayed) == "true", err: err}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			r.err = errors.Join(r.err, err)
		}
	}
	return r
}

// effects returns the Effect ops of f in history order.
func effects(rec *models.Recorder, f string) []models.Op {
	var out []models.Op
	for _, op := range rec.Ops() {
		if op.Type == models.Effect && op.F == f {
			out = append(out, op)
		}
	}
	return out
}

func decode[T any](t *testing.T, op models.Op) T {
	t.Helper()
	var v T
	if err := op.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChargeIdempotency walks one table of calls per case and checks each
// answer and the effects the history holds afterwards.
func TestChargeIdempotency(t *testing.T) {
	type call struct {
		key, body  string
		status     int
		code       string // error code, or "" on success
		replayed   bool
		id         string // expected charge id ("" = don't care)
		chargeStat string
	}
	const visa = `{"order_id":"o-1","amount":2500,"card":"tok_visa"}`
	cases := []struct {
		name       string
		calls      []call
		newEffects int // effects with Replay=false
		replays    int
		refusals   int // Info ops
	}{
		{"same key same body replays", []call{
			{key: "k1", body: visa, status: 200, id: "ch_000001", chargeStat: "succeeded"},
			{key: "k1", body: visa, status: 200, replayed: true, id: "ch_000001", chargeStat: "succeeded"},
		}, 1, 1, 0},
		{"same key, same JSON, other spacing and key order", []call{
			{key: "k1", body: visa, status: 200, id: "ch_000001"},
			{key: "k1", body: `{ "card":"tok_visa", "amount":2500, "order_id":"o-1" }`, status: 200, replayed: true, id: "ch_000001"},
		}, 1, 1, 0},
		{"same key other body is refused", []call{
			{key: "k1", body: visa, status: 200, id: "ch_000001"},
			{key: "k1", body: `{"order_id":"o-1","amount":2600,"card":"tok_visa"}`, status: 409, code: "idempotency_key_reused"},
		}, 1, 0, 1},
		{"no key: every call is new", []call{
			{body: visa, status: 200, id: "ch_000001"},
			{body: visa, status: 200, id: "ch_000002"},
		}, 2, 0, 0},
		{"decline by card, replayed as a decline", []call{
			{key: "k1", body: `{"order_id":"o-2","amount":100,"card":"tok_decline_insufficient"}`, status: 402, code: "card_declined", id: "ch_000001", chargeStat: "declined"},
			{key: "k1", body: `{"order_id":"o-2","amount":100,"card":"tok_decline_insufficient"}`, status: 402, code: "card_declined", replayed: true, id: "ch_000001", chargeStat: "declined"},
		}, 1, 1, 0},
		{"bad requests act on nothing", []call{
			{key: "k1", body: `not json`, status: 400, code: "bad_request"},
			{key: "k1", body: `{"order_id":"o-1","amount":0,"card":"tok_visa"}`, status: 400, code: "bad_request"},
			{key: "k1", body: `{"amount":5,"card":"tok_visa"}`, status: 400, code: "bad_request"},
			// the key was not consumed by the bad requests
			{key: "k1", body: visa, status: 200, id: "ch_000001"},
		}, 1, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, rec := startWorld(t)
			url := "http://" + w.Provider("gateway").Addr() + "/charges"
			for i, cl := range c.calls {
				r := post(context.Background(), http.DefaultClient, url, cl.key, cl.body)
				if r.err != nil {
					t.Fatalf("call %d: %v", i, r.err)
				}
				if r.status != cl.status || r.str("code") != cl.code || r.replayed != cl.replayed {
					t.Fatalf("call %d: got %d code %q replayed %v (%v), want %d code %q replayed %v",
						i, r.status, r.str("code"), r.replayed, r.body, cl.status, cl.code, cl.replayed)
				}
				if cl.id != "" && r.str("id") != cl.id {
					t.Fatalf("call %d: id %q, want %q", i, r.str("id"), cl.id)
				}
				if cl.chargeStat != "" && r.str("status") != cl.chargeStat {
					t.Fatalf("call %d: status %q, want %q", i, r.str("status"), cl.chargeStat)
				}
			}
			var fresh, replays, refusals int
			for _, op := range rec.Ops() {
				switch op.Type {
				case models.Effect:
					ch := decode[models.ChargeEffect](t, op)
					if ch.Replay {
						replays++
					} else {
						fresh++
					}
					if op.Proc != models.ProcGateway || op.F != models.FCharge || op.Order == "" {
						t.Errorf("effect op %v: want proc %s, f %s and an order", op, models.ProcGateway, models.FCharge)
					}
				case models.Info:
					refusals++
				}
			}
			if fresh != c.newEffects || replays != c.replays || refusals != c.refusals {
				t.Fatalf("history: %d new effects, %d replays, %d refusals; want %d, %d, %d\n%v",
					fresh, replays, refusals, c.newEffects, c.replays, c.refusals, rec.Ops())
			}
			if got := len(rec.Ops()); got != len(c.calls) {
				t.Fatalf("%d ops for %d calls: every call must be recorded once", got, len(c.calls))
			}
			if len(w.Provider("gateway").Effects("charge")) != c.newEffects {
				t.Fatalf("gateway holds %d charges, want %d", len(w.Provider("gateway").Effects("charge")), c.newEffects)
			}
		})
	}
}

// A second request with the key of one still executing is told to retry.
func TestChargeInProgress(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	w, rec := startWorld(t, func(o *options) {
		o.beforeApply = func(string) {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	})
	url := "http://" + w.Provider("gateway").Addr() + "/charges"
	const body = `{"order_id":"o-1","amount":10,"card":"tok_visa"}`
	first := make(chan reply, 1)
	go func() { first <- post(context.Background(), http.DefaultClient, url, "k", body) }()
	<-entered
	r := post(context.Background(), http.DefaultClient, url, "k", body)
	if r.err != nil || r.status != 409 || r.str("code") != "idempotency_in_progress" {
		t.Fatalf("second request while the first runs: %d %v %v, want 409 idempotency_in_progress", r.status, r.body, r.err)
	}
	close(release)
	if r := <-first; r.err != nil || r.status != 200 || r.str("id") != "ch_000001" {
		t.Fatalf("first request: %d %v %v", r.status, r.body, r.err)
	}
	if r := post(context.Background(), http.DefaultClient, url, "k", body); r.status != 200 || !r.replayed {
		t.Fatalf("after the first finished: %d replayed=%v, want a 200 replay", r.status, r.replayed)
	}
	if n := len(effects(rec, models.FCharge)); n != 2 {
		t.Fatalf("%d charge effects, want 2 (one new, one replay)", n)
	}
}

// 50 concurrent requests with one key: exactly one charge.
func TestChargeConcurrentSameKey(t *testing.T) {
	w, rec := startWorld(t)
	url := "http://" + w.Provider("gateway").Addr() + "/charges"
	const n = 50
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = post(context.Background(), http.DefaultClient, url, "same", `{"order_id":"o-9","amount":700,"card":"tok_visa"}`)
		}()
	}
	wg.Wait()
	fresh := 0
	for _, op := range effects(rec, models.FCharge) {
		if !decode[models.ChargeEffect](t, op).Replay {
			fresh++
		}
	}
	if fresh != 1 || len(w.Provider("gateway").Effects("charge")) != 1 {
		t.Fatalf("%d non-replay charge effects and %d charges, want exactly 1", fresh, len(w.Provider("gateway").Effects("charge")))
	}
	if len(rec.Ops()) != n {
		t.Fatalf("%d ops for %d calls", len(rec.Ops()), n)
	}
	for i, r := range replies {
		ok := (r.status == 200 && r.str("id") == "ch_000001") || (r.status == 409 && r.str("code") == "idempotency_in_progress")
		if r.err != nil || !ok {
			t.Fatalf("reply %d: %d %v %v", i, r.status, r.body, r.err)
		}
	}
}

func TestAmbiguous500(t *testing.T) {
	cases := []struct {
		name   string
		card   string
		inject bool
	}{
		{"by card", "tok_ambiguous_500_x", false},
		{"injected", "tok_visa", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, rec := startWorld(t)
			if c.inject {
				if err := w.Provider("gateway").InjectAmbiguous("charge", AmbiguousError, 1); err != nil {
					t.Fatal(err)
				}
			}
			url := "http://" + w.Provider("gateway").Addr() + "/charges"
			body := `{"order_id":"o-1","amount":300,"card":"` + c.card + `"}`
			r := post(context.Background(), http.DefaultClient, url, "k", body)
			if r.err != nil || r.status != 500 {
				t.Fatalf("first: %d %v %v, want 500", r.status, r.body, r.err)
			}
			r = post(context.Background(), http.DefaultClient, url, "k", body)
			if r.status != 200 || !r.replayed || r.str("id") != "ch_000001" {
				t.Fatalf("retry: %d %v replayed=%v, want the stored 200", r.status, r.body, r.replayed)
			}
			effs := effects(rec, models.FCharge)
			if len(effs) != 2 {
				t.Fatalf("%d effects, want 2", len(effs))
			}
			first, second := decode[models.ChargeEffect](t, effs[0]), decode[models.ChargeEffect](t, effs[1])
			if first.Ambiguous != AmbiguousError || first.Replay || first.Status != models.ChargeSucceeded || first.IdempotencyKey != "k" {
				t.Fatalf("first effect %+v: want applied, ambiguous 500, key k", first)
			}
			if !second.Replay || second.Ambiguous != "" {
				t.Fatalf("second effect %+v: want a plain replay", second)
			}
			// the injection was used up
			if r := post(context.Background(), http.DefaultClient, url, "", `{"order_id":"o-2","amount":1,"card":"tok_visa"}`); c.inject && r.status != 200 {
				t.Fatalf("after the injection: %d, want 200", r.status)
			}
		})
	}
}

func TestAmbiguousHang(t *testing.T) {
	w, rec := startWorld(t)
	url := "http://" + w.Provider("gateway").Addr() + "/charges"
	body := `{"order_id":"o-1","amount":300,"card":"tok_ambiguous_hang_1"}`
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan reply, 1)
	go func() { got <- post(ctx, http.DefaultClient, url, "k", body) }()
	// Give up only once the charge is applied: the caller cannot know that,
	// the test can.
	for len(effects(rec, models.FCharge)) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-got:
		t.Fatalf("a hanging charge was answered: %d %v %v", r.status, r.body, r.err)
	default:
	}
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", r.err)
	}
	eff := decode[models.ChargeEffect](t, effects(rec, models.FCharge)[0])
	if eff.Ambiguous != AmbiguousHang || eff.Status != models.ChargeSucceeded {
		t.Fatalf("effect %+v: want applied and ambiguous hang", eff)
	}
	// a retry with a real client timeout gets the stored answer
	client := &http.Client{Timeout: 30 * time.Second}
	r := post(context.Background(), client, url, "k", body)
	if r.err != nil || r.status != 200 || !r.replayed || r.str("id") != "ch_000001" {
		t.Fatalf("retry: %d %v %v, want stored 200", r.status, r.body, r.err)
	}

	// A hang with a client timeout, released by Close: the caller sees an error, never an answer.
	got2 := make(chan reply, 1)
	go func() {
		got2 <- post(context.Background(), client, url, "", `{"order_id":"o-2","amount":5,"card":"tok_ambiguous_hang"}`)
	}()
	for len(effects(rec, models.FCharge)) < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-got2; r.err == nil {
		t.Fatalf("hanging request answered %d %v after Close, want a connection error", r.status, r.body)
	}
}

func TestRefunds(t *testing.T) {
	w, rec := startWorld(t)
	base := "http://" + w.Provider("gateway").Addr()
	charge := func(card string) string {
		r := post(context.Background(), http.DefaultClient, base+"/charges", "", `{"order_id":"o-1","amount":1000,"card":"`+card+`"}`)
		return r.str("id")
	}
	ok, declined := charge("tok_visa"), charge("tok_decline")
	cases := []struct {
		name, key, body string
		status          int
		code, refStatus string
		replayed        bool
	}{
		{"unknown charge", "", `{"charge_id":"ch_999999","amount":10,"order_id":"o-1"}`, 404, "charge_not_found", "rejected", false},
		{"more than charged", "", `{"charge_id":"` + ok + `","amount":1001,"order_id":"o-1"}`, 400, "refund_exceeds_charge", "rejected", false},
		{"declined charge", "", `{"charge_id":"` + declined + `","amount":1,"order_id":"o-1"}`, 400, "refund_exceeds_charge", "rejected", false},
		{"partial", "r1", `{"charge_id":"` + ok + `","amount":600,"order_id":"o-1"}`, 200, "", "succeeded", false},
		{"partial replayed", "r1", `{"charge_id":"` + ok + `","amount":600,"order_id":"o-1"}`, 200, "", "succeeded", true},
		{"second partial exceeds what is left", "", `{"charge_id":"` + ok + `","amount":600,"order_id":"o-1"}`, 400, "refund_exceeds_charge", "rejected", false},
		{"rest (amount 0 = all that is left)", "", `{"charge_id":"` + ok + `","order_id":"o-1"}`, 200, "", "succeeded", false},
	}
	for _, c := range cases {
		r := post(context.Background(), http.DefaultClient, base+"/refunds", c.key, c.body)
		if r.err != nil || r.status != c.status || r.str("code") != c.code || r.str("status") != c.refStatus || r.replayed != c.replayed {
			t.Fatalf("%s: %d %v replayed=%v %v; want %d %q %q replayed=%v", c.name, r.status, r.body, r.replayed, r.err, c.status, c.code, c.refStatus, c.replayed)
		}
	}
	effs := effects(rec, models.FRefund)
	if len(effs) != len(cases) {
		t.Fatalf("%d refund effects for %d calls", len(effs), len(cases))
	}
	var refunded int64
	for _, op := range effs {
		e := decode[models.RefundEffect](t, op)
		if e.Status == models.EffectSucceeded && !e.Replay {
			refunded += e.Amount
		}
	}
	if refunded != 1000 {
		t.Fatalf("history says %d refunded, want 1000", refunded)
	}
	if last := decode[models.RefundEffect](t, effs[len(effs)-1]); last.RefundID != "re_000002" || last.Amount != 400 {
		t.Fatalf("last refund %+v, want re_000002 of 400", last)
	}
}

func TestCarrierAndMailer(t *testing.T) {
	w, rec := startWorld(t)
	ship := "http://" + w.Provider("carrier").Addr() + "/shipments"
	mail := "http://" + w.Provider("mailer").Addr() + "/emails"
	const sbody = `{"order_id":"o-1","items":[{"sku":"sku-1","qty":2}]}`
	const mbody = `{"order_id":"o-1","kind":"confirmation","to":"c-1@example.test"}`

	steps := []struct {
		url, key, body string
		status         int
		id             string
		replayed       bool
	}{
		{ship, "s1", sbody, 201, "sh_000001", false},
		{ship, "s1", sbody, 201, "sh_000001", true},
		{ship, "", sbody, 201, "sh_000002", false},
		{mail, "m1", mbody, 202, "em_000001", false},
		{mail, "m1", mbody, 202, "em_000001", true},
		{mail, "m1", `{"order_id":"o-1","kind":"cancellation","to":"x"}`, 409, "", false},
		{mail, "", `{"order_id":"o-1"}`, 400, "", false},
	}
	for i, s := range steps {
		r := post(context.Background(), http.DefaultClient, s.url, s.key, s.body)
		if r.err != nil || r.status != s.status || r.str("id") != s.id || r.replayed != s.replayed {
			t.Fatalf("step %d: %d %v replayed=%v %v", i, r.status, r.body, r.replayed, r.err)
		}
	}
	if len(rec.Ops()) != len(steps) {
		t.Fatalf("%d ops for %d calls", len(rec.Ops()), len(steps))
	}
	em := decode[models.EmailEffect](t, effects(rec, models.FEmail)[0])
	if em.Kind != "confirmation" || em.EmailID != "em_000001" || effects(rec, models.FEmail)[0].Proc != models.ProcMailer {
		t.Fatalf("email effect %+v", em)
	}
	if got := w.Provider("carrier").Effects("shipment"); len(got) != 2 || got[0].Saga != "o-1" {
		t.Fatalf("shipments %+v", got)
	}

	// injected ambiguity on the carrier and the mailer
	if err := w.Provider("carrier").InjectAmbiguous("shipment", AmbiguousError, 1); err != nil {
		t.Fatal(err)
	}
	if r := post(context.Background(), http.DefaultClient, ship, "s2", sbody); r.status != 500 {
		t.Fatalf("injected carrier failure: %d", r.status)
	}
	if r := post(context.Background(), http.DefaultClient, ship, "s2", sbody); r.status != 201 || r.str("id") != "sh_000003" {
		t.Fatalf("carrier retry: %d %v", r.status, r.body)
	}
	if err := w.Provider("mailer").InjectAmbiguous("email", "sometimes", 1); err == nil {
		t.Fatal("an unknown ambiguity mode was accepted")
	}
	sh := effects(rec, models.FShipment)
	if e := decode[models.ShipmentEffect](t, sh[len(sh)-2]); e.Ambiguous != AmbiguousError || e.ShipmentID != "sh_000003" {
		t.Fatalf("ambiguous shipment effect %+v", e)
	}
}

// Start refuses to run without a recorder and Close may be called twice.
func TestStartClose(t *testing.T) {
	if _, err := Start(context.Background(), nil, nil); err == nil {
		t.Fatal("Start without a recorder succeeded")
	}
	w, _ := startWorld(t)
	if len(w.URLs()) != 3 {
		t.Fatalf("URLs %v", w.URLs())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Charge and refund injections are separate: the nemesis picks which
// step of the saga fails ambiguously.
func TestInjectRefundsOnly(t *testing.T) {
	w, rec := startWorld(t)
	base := "http://" + w.Provider("gateway").Addr()
	if err := w.Provider("gateway").InjectAmbiguous("refund", AmbiguousError, 1); err != nil {
		t.Fatal(err)
	}
	c := post(context.Background(), http.DefaultClient, base+"/charges", "c", `{"order_id":"o-1","amount":50,"card":"tok_visa"}`)
	if c.status != 200 {
		t.Fatalf("charge under a refund injection: %d %v", c.status, c.body)
	}
	body := `{"charge_id":"` + c.str("id") + `","amount":50,"order_id":"o-1"}`
	if r := post(context.Background(), http.DefaultClient, base+"/refunds", "r", body); r.status != 500 {
		t.Fatalf("injected refund: %d %v, want 500", r.status, r.body)
	}
	if r := post(context.Background(), http.DefaultClient, base+"/refunds", "r", body); r.status != 200 || !r.replayed || r.str("id") != "re_000001" {
		t.Fatalf("refund retry: %d %v", r.status, r.body)
	}
	e := decode[models.RefundEffect](t, effects(rec, models.FRefund)[0])
	if e.Ambiguous != AmbiguousError || e.Status != models.EffectSucceeded || w.Provider("gateway").Effects("charge")[0].Refunded != 50 {
		t.Fatalf("refund effect %+v, charges %+v", e, w.Provider("gateway").Effects("charge"))
	}
}

// The same calls in the same order give the same history (ids included):
// a seed replays the world exactly.
func TestDeterministicHistory(t *testing.T) {
	script := func() []string {
		w, rec := startWorld(t)
		g := "http://" + w.Provider("gateway").Addr()
		calls := []struct{ url, key, body string }{
			{g + "/charges", "a", `{"order_id":"o-1","amount":10,"card":"tok_visa"}`},
			{g + "/charges", "", `{"order_id":"o-2","amount":20,"card":"tok_decline"}`},
			{g + "/refunds", "r", `{"charge_id":"ch_000001","amount":10,"order_id":"o-1"}`},
			{g + "/charges", "a", `{"order_id":"o-1","amount":10,"card":"tok_visa"}`},
			{"http://" + w.Provider("carrier").Addr() + "/shipments", "s", `{"order_id":"o-1","items":[]}`},
			{"http://" + w.Provider("mailer").Addr() + "/emails", "", `{"order_id":"o-1","kind":"confirmation","to":"x"}`},
		}
		for _, c := range calls {
			if r := post(context.Background(), http.DefaultClient, c.url, c.key, c.body); r.err != nil {
				t.Fatal(r.err)
			}
		}
		var out []string
		for _, op := range rec.Ops() {
			out = append(out, op.Proc+" "+string(op.Type)+" "+op.F+" "+op.Order+" "+string(op.Value))
		}
		return out
	}
	a, b := script(), script()
	if len(a) != 6 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("histories differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// Two planned gateway faults are two faults: a later injection queues
// behind a pending one instead of replacing it.
func TestInjectionsQueue(t *testing.T) {
	w, _ := startWorld(t)
	if err := w.Provider("gateway").InjectAmbiguous("charge", AmbiguousError, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Provider("gateway").InjectAmbiguous("charge", AmbiguousError, 1); err != nil {
		t.Fatal(err)
	}
	url := "http://" + w.Provider("gateway").Addr() + "/charges"
	for i, want := range []int{500, 500, 200} {
		body := fmt.Sprintf(`{"order_id":"o-%d","amount":300,"card":"tok_visa"}`, i)
		r := post(context.Background(), http.DefaultClient, url, fmt.Sprintf("k%d", i), body)
		if r.err != nil || r.status != want {
			t.Fatalf("charge %d: %d %v, want %d", i, r.status, r.err, want)
		}
	}
}
