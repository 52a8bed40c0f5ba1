package world

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/sagachaos/sagachaos/models"
)

// kind is what a provider kind makes of a call: the registry of built-in
// provider kinds, one file each (plain.go, payments.go), by the name a
// manifest's world[].kind spells.
type kind interface {
	// validate refuses a request the kind cannot act on (400).
	validate(c *call) error
	// apply performs the call; the service's lock is held.
	apply(c *call, amb, key string) outcome
}

var kinds = map[string]kind{}

func registerKind(name string, k kind) {
	if kinds[name] != nil {
		panic(fmt.Sprintf("world: provider kind %q registered twice", name))
	}
	kinds[name] = k
}

func kindNames() []string {
	var out []string
	for n := range kinds {
		if n == "" {
			n = `"" (plain)`
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// applyPlain is what every kind does with an action it gives no meaning of
// its own: a refers field must name an earlier effect (404 otherwise); a
// declining outcome is a declined effect with an id; anything else
// succeeds with one.
func applyPlain(c *call, amb, key string) outcome {
	p := c.p
	saga := c.saga
	if r := c.a.Refers; r != nil {
		ref := p.byID[c.str(r.Field)]
		if ref == nil || ref.Action != r.Action {
			e := &Effect{Action: c.a.Name, Saga: saga, Status: models.EffectRejected, Request: c.body}
			p.record(e)
			return outcome{order: saga, answer: rejected(http.StatusNotFound, "not_found", fmt.Sprintf("no %s %s", r.Action, c.str(r.Field))),
				effect: c.effect("", models.EffectRejected, amb, key, nil)}
		}
		if saga == "" {
			saga = ref.Saga
		}
	}
	id := p.nextID(c.a)
	e := &Effect{Action: c.a.Name, ID: id, Saga: saga, Status: models.EffectSucceeded, Request: c.body}
	ans := c.success(id)
	if c.declined() {
		e.Status, ans = models.EffectDeclined, c.decline(id)
	}
	p.record(e)
	return outcome{order: saga, answer: ans, effect: c.effect(id, e.Status, amb, key, nil)}
}

// plain is the kind of a provider with no semantics beyond its actions'.
type plain struct{}

func (plain) validate(*call) error                   { return nil }
func (plain) apply(c *call, amb, key string) outcome { return applyPlain(c, amb, key) }
func init()                                          { registerKind("", plain{}) }
