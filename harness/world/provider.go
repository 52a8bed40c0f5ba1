package world

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// Provider is one declared fake third party (models.Provider): its actions
// are POST endpoints; what an action does is its provider kind's (kinds.go).
type Provider struct {
	decl models.Provider
	kind kind
	svc  *service

	// guarded by svc.mu
	effects []*Effect
	byID    map[string]*Effect
	counter map[string]int // ids issued, by action
}

// Effect is one call a provider acted on (a snapshot through Effects).
type Effect struct {
	Action string
	ID     string // empty for a rejected call
	Saga   string
	Status string // models.EffectSucceeded, EffectDeclined or EffectRejected
	// Amount is a payments action's amount; Refunded, for a charge, the sum
	// of its succeeded refunds.
	Amount   int64
	Refunded int64
	// Request is the request body.
	Request map[string]any
}

func newProvider(d models.Provider, rec *models.Recorder, o *options) (*Provider, error) {
	k, ok := kinds[d.Kind]
	if !ok {
		return nil, fmt.Errorf("provider %s: unknown kind %q (known: %s)", d.Name, d.Kind, strings.Join(kindNames(), ", "))
	}
	p := &Provider{decl: d, kind: k, svc: newService(d.Name, d.Proc(), rec, o), byID: map[string]*Effect{}, counter: map[string]int{}}
	for _, a := range d.Actions {
		p.svc.handle("POST "+a.Path, a.Name, a.Saga, p.parser(a))
	}
	return p, nil
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.decl.Name }

// Addr is the provider's host:port (put a toxiproxy link in front of it).
func (p *Provider) Addr() string { return p.svc.addr() }

// InjectAmbiguous makes the next n new requests of action ambiguous
// whatever their content: mode AmbiguousError (applied, answered 500) or
// AmbiguousHang (applied, never answered). Injections queue; replays are
// never ambiguous.
func (p *Provider) InjectAmbiguous(action, mode string, n int) error {
	if _, ok := p.decl.Action(action); !ok {
		return fmt.Errorf("world %s: no action %q", p.decl.Name, action)
	}
	return p.svc.inject(action, mode, n)
}

// Effects returns a snapshot of the effects of action ("" for every
// action), in the order they were applied.
func (p *Provider) Effects(action string) []Effect {
	p.svc.mu.Lock()
	defer p.svc.mu.Unlock()
	var out []Effect
	for _, e := range p.effects {
		if action == "" || e.Action == action {
			out = append(out, *e)
		}
	}
	return out
}

// call is one parsed, valid request to an action.
type call struct {
	p     *Provider
	a     models.ProviderAction
	body  map[string]any
	saga  string
	token string // the outcome field's value
}

func (c *call) orderID() string { return c.saga }

func (c *call) ambiguity() string {
	switch {
	case strings.Contains(c.token, models.OutcomeAmbiguous500):
		return AmbiguousError
	case strings.Contains(c.token, models.OutcomeAmbiguousHang):
		return AmbiguousHang
	}
	return ""
}

func (c *call) declined() bool { return strings.Contains(c.token, models.OutcomeDecline) }

func (c *call) apply(amb, key string) outcome { return c.p.kind.apply(c, amb, key) }

// str returns a string field of the body.
func (c *call) str(field string) string { s, _ := c.body[field].(string); return s }

// num returns an integer field of the body (ok false: absent or not an
// integer).
func (c *call) num(field string) (int64, bool) {
	n, ok := c.body[field].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

func (p *Provider) parser(a models.ProviderAction) func([]byte) (request, error) {
	return func(b []byte) (request, error) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var body map[string]any
		if err := dec.Decode(&body); err != nil || body == nil {
			return nil, fmt.Errorf("%s body: want a JSON object", a.Name)
		}
		c := &call{p: p, a: a, body: body}
		c.saga = c.str(a.Saga)
		if c.saga == "" && a.Refers == nil {
			return nil, fmt.Errorf("%s: %s is required", a.Name, a.Saga)
		}
		if a.Refers != nil && c.str(a.Refers.Field) == "" {
			return nil, fmt.Errorf("%s: %s is required", a.Name, a.Refers.Field)
		}
		for _, f := range a.Required {
			if v, ok := body[f]; !ok || v == nil || v == "" {
				return nil, fmt.Errorf("%s: %s is required", a.Name, f)
			}
		}
		if a.Outcome != "" {
			c.token, _ = body[a.Outcome].(string)
		}
		if err := p.kind.validate(c); err != nil {
			return nil, err
		}
		return c, nil
	}
}

// nextID issues the next id of an action; caller holds svc.mu.
func (p *Provider) nextID(a models.ProviderAction) string {
	p.counter[a.Name]++
	prefix := a.IDPrefix
	if prefix == "" {
		prefix = a.Name
		if len(prefix) > 2 {
			prefix = prefix[:2]
		}
		prefix += "_"
	}
	return fmt.Sprintf("%s%06d", prefix, p.counter[a.Name])
}

// record keeps e; caller holds svc.mu.
func (p *Provider) record(e *Effect) {
	p.effects = append(p.effects, e)
	if e.ID != "" {
		p.byID[e.ID] = e
	}
}

// effectValue is the value of an effect op: the request's scalar fields,
// then what the world adds (the id under the action's id field, status,
// idempotency_key, replay, ambiguous) over them.
type effectValue map[string]any

func (v effectValue) replay() replayable {
	out := make(effectValue, len(v)+1)
	for k, x := range v {
		out[k] = x
	}
	out["replay"] = true
	delete(out, "ambiguous")
	return out
}

func (c *call) effect(id, status, amb, key string, extra map[string]any) effectValue {
	v := effectValue{}
	keys := make([]string, 0, len(c.body))
	for k := range c.body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch x := c.body[k].(type) {
		case string, bool, json.Number:
			v[k] = x
		}
	}
	for k, x := range extra {
		v[k] = x
	}
	idField := c.a.IDField
	if idField == "" {
		idField = "id"
	}
	if id != "" {
		v[idField] = id
	}
	v["status"] = status
	if key != "" {
		v["idempotency_key"] = key
	}
	if amb != "" {
		v["ambiguous"] = amb
	}
	return v
}

// providerReply is a provider's JSON answer.
type providerReply struct {
	ID     string `json:"id,omitempty"`
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (c *call) success(id string) answer {
	st := c.a.Answer
	if st == 0 {
		st = http.StatusOK
	}
	return answer{st, mustJSON(providerReply{ID: id, Status: models.EffectSucceeded})}
}

func (c *call) decline(id string) answer {
	code := c.a.DeclineCode
	if code == "" {
		code = "declined"
	}
	return answer{http.StatusPaymentRequired, mustJSON(providerReply{ID: id, Status: models.EffectDeclined, Code: code})}
}

func rejected(status int, code, msg string) answer {
	return answer{status, mustJSON(providerReply{Status: models.EffectRejected, Code: code, Error: msg})}
}
