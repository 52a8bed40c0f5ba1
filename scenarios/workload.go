package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/sagachaos/sagachaos/models"
)

// This file is the workload half of generation: the concrete workload of a
// scenario (the sagas the clients start, with request bodies drawn from the
// target's body template, and the initial amounts of its counted
// resources), drawn from the target's declarations (Domain) and the
// scenario's generic ranges. The fault half is generate.go.

// Domain is what the generator knows of the target's domain: the workload
// declaration with its parsed body template, and the resources.
type Domain struct {
	Workload  *models.Workload
	Body      *models.TNode
	Resources []models.Resource
}

// NewDomain parses w's body template.
func NewDomain(w *models.Workload, resources []models.Resource) (*Domain, error) {
	if w == nil {
		return nil, fmt.Errorf("the target declares no workload")
	}
	body, err := models.ParseTemplate(w.Start.Body)
	if err != nil {
		return nil, fmt.Errorf("workload.start.body: %w", err)
	}
	return &Domain{Workload: w, Body: body, Resources: resources}, nil
}

// Params lists the names of the ranges the domain lets a scenario override.
func (d *Domain) Params() []string {
	if d == nil {
		return nil
	}
	set := map[string]bool{}
	d.Body.Walk(func(n *models.TNode) {
		for _, r := range []models.Range{n.Int, n.Len} {
			if r.Param != "" {
				set[r.Param] = true
			}
		}
	})
	for _, r := range d.Resources {
		if r.Keys != nil && r.Keys.Count.Param != "" {
			set[r.Keys.Count.Param] = true
		}
		if r.Initial != nil && r.Initial.Param != "" {
			set[r.Initial.Param] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// MaxKeys bounds the keys of one counted resource.
const MaxKeys = 10_000

// keyParam reports whether param names a resource's key count.
func (d *Domain) keyParam(param string) bool {
	for _, r := range d.Resources {
		if r.Keys != nil && r.Keys.Count.Param == param {
			return true
		}
	}
	return false
}

// Workload is the concrete list of sagas the clients start.
type Workload struct {
	// Resources holds the initial amount of every key of every counted
	// resource, by resource name.
	Resources map[string]map[string]int64 `json:"resources,omitempty"`
	Clients   int                         `json:"clients"`
	Sagas     []SagaPlan                  `json:"sagas"`
}

// SagaPlan is one saga a client starts.
type SagaPlan struct {
	Key string `json:"key"`
	// Body is the start request's JSON body.
	Body json.RawMessage `json:"body"`
	// Client is the client (0-based) that starts it; a client starts its
	// sagas in plan order.
	Client int `json:"client"`
	// Submissions is how many times the same request (same key) is sent
	// back to back; >1 models a double-click or a proxy retry.
	Submissions int `json:"submissions,omitempty"`
	// RetryUnknown: after an indeterminate outcome (timeout, 5xx), retry
	// with the same key up to this many times.
	RetryUnknown int `json:"retry_unknown,omitempty"`
	// Gap is the pause before this saga (0 inside a burst).
	Gap Duration `json:"gap,omitempty"`

	// Races (the generator decides them, races.go; the driver runs them).
	//
	// Concurrent more requests with the same key are sent at the same
	// instant as the first (a double click): each its own client process.
	Concurrent int `json:"concurrent,omitempty"`
	// DuplicateAfter, when set, sends one more request with the same key
	// this long after the first, whether or not it was answered (a
	// duplicate while the first may still be in flight).
	DuplicateAfter Duration `json:"duplicate_after,omitempty"`
	// RetrySpread spreads the RetryUnknown retries of a submission over
	// about this long (the k-th waits k/(1+…+R) of it), so a retry can
	// outlast a restarted API; zero: the driver's short backoff.
	RetrySpread Duration `json:"retry_spread,omitempty"`
	// Parallel: the client starts this saga without waiting for its
	// previous one to be answered (a burst on the same keys).
	Parallel bool `json:"parallel,omitempty"`
}

// UnmarshalJSON reads a workload, including an older scenario.json's order
// workload ("initial_stock", "orders" with customer, items, card and total):
// its stock becomes the resource "stock" and each order's fields its body.
func (w *Workload) UnmarshalJSON(b []byte) error {
	type plain Workload
	var v struct {
		plain
		InitialStock map[string]int64 `json:"initial_stock"`
		Orders       []struct {
			SagaPlan
			Customer string          `json:"customer"`
			Items    json.RawMessage `json:"items"`
			Card     string          `json:"card"`
			Total    int64           `json:"total"`
		} `json:"orders"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*w = Workload(v.plain)
	if v.InitialStock != nil {
		if w.Resources == nil {
			w.Resources = map[string]map[string]int64{}
		}
		w.Resources[models.LegacyStock] = v.InitialStock
	}
	for _, o := range v.Orders {
		p := o.SagaPlan
		if len(p.Body) == 0 {
			items := o.Items
			if len(items) == 0 {
				items = json.RawMessage("null")
			}
			c, _ := json.Marshal(o.Customer)
			card, _ := json.Marshal(o.Card)
			p.Body = json.RawMessage(fmt.Sprintf(`{"customer":%s,"items":%s,"card":%s,"total":%d}`, c, items, card, o.Total))
		}
		w.Sagas = append(w.Sagas, p)
	}
	return nil
}

// resourceKeys is the drawn keys of each counted resource, in index order.
type resourceKeys map[string][]string

// drawWorkload draws sc's workload: resources first (every counted
// resource with drawn keys, in declaration order), then clients, the
// number of sagas, and each saga's client, body, submissions and gap.
func drawWorkload(t *rapid.T, s *Spec, d *Domain, sc *Scenario) {
	keys := resourceKeys{}
	if d != nil {
		for _, r := range d.Resources {
			if r.Kind != "" {
				continue
			}
			amounts := map[string]int64{}
			switch {
			case r.Keys != nil:
				n := drawRange(t, s.rangeFor(r.Keys.Count, s.ResourceKeys), "keys:"+r.Name)
				for i := 1; i <= n; i++ {
					k := r.Keys.KeyName(i)
					keys[r.Name] = append(keys[r.Name], k)
					amounts[k] = int64(drawRange(t, s.rangeFor(*r.Initial, s.ResourceInitial), "initial:"+r.Name))
				}
			default:
				for k, v := range r.Amounts {
					amounts[k] = v
					keys[r.Name] = append(keys[r.Name], k)
				}
				sort.Strings(keys[r.Name])
			}
			if sc.Workload.Resources == nil {
				sc.Workload.Resources = map[string]map[string]int64{}
			}
			sc.Workload.Resources[r.Name] = amounts
		}
	}
	sc.Workload.Clients = drawRange(t, s.Clients, "clients")
	n := drawRange(t, s.Sagas, "sagas")
	keyFormat := "k-{n}"
	if d != nil && d.Workload.Start.Key != "" {
		keyFormat = d.Workload.Start.Key
	}
	for i := 1; i <= n; i++ {
		p := SagaPlan{
			Key:    strings.ReplaceAll(keyFormat, "{n}", fmt.Sprint(i)),
			Client: rapid.IntRange(0, sc.Workload.Clients-1).Draw(t, "client"),
		}
		if d != nil {
			g := &bodyGen{t: t, s: s, keys: keys, n: i}
			p.Body = g.draw(d.Body).json()
		} else {
			p.Body = json.RawMessage("{}")
		}
		p.Submissions = 1
		if chance(t, s.DuplicateRate, "duplicate") {
			p.Submissions = 2
		}
		p.RetryUnknown = s.RetryUnknown
		if !chance(t, s.BurstRate, "burst") {
			p.Gap = Duration(int64(drawRange(t, s.GapMS, "gap")) * 1e6)
		}
		sc.Workload.Sagas = append(sc.Workload.Sagas, p)
	}
}

// rangeFor is r (a declared range) as the scenario overrides it: by its
// param name first, then by the generic override when one is given.
func (s *Spec) rangeFor(r models.Range, generic *Range) Range {
	if r.Param != "" {
		if o, ok := s.Params[r.Param]; ok {
			return o
		}
	}
	if generic != nil {
		return *generic
	}
	return Range{Min: r.Min, Max: r.Max}
}

// gval is a drawn JSON value: an object keeps its field order.
type gval struct {
	fields []gfield
	list   []*gval
	raw    json.RawMessage
	num    int64
	isNum  bool
	kind   byte // 'o', 'a', 'r' (raw), 'n' (number)
}

type gfield struct {
	name string
	v    *gval
}

func (v *gval) json() json.RawMessage {
	var b bytes.Buffer
	v.write(&b)
	return b.Bytes()
}

func (v *gval) write(b *bytes.Buffer) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, f := range v.fields {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f.name)
			b.Write(k)
			b.WriteByte(':')
			f.v.write(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, e := range v.list {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b)
		}
		b.WriteByte(']')
	case 'n':
		fmt.Fprint(b, v.num)
	default:
		b.Write(v.raw)
	}
}

func (v *gval) field(name string) *gval {
	if v == nil {
		return nil
	}
	for _, f := range v.fields {
		if f.name == name {
			return f.v
		}
	}
	return nil
}

// number reads an integer value (a drawn int or a literal number).
func (v *gval) number() int64 {
	if v == nil {
		return 0
	}
	if v.kind == 'n' {
		return v.num
	}
	var n int64
	_ = json.Unmarshal(v.raw, &n)
	return n
}

func (v *gval) str() string {
	if v == nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(v.raw, &s)
	return s
}

func rawStr(s string) *gval {
	b, _ := json.Marshal(s)
	return &gval{kind: 'r', raw: b}
}

// bodyGen draws one saga's body.
type bodyGen struct {
	t    *rapid.T
	s    *Spec
	keys resourceKeys
	n    int // the saga's number, from 1
	// inside an array element: the key index per resource
	elem map[string]int
}

func (g *bodyGen) draw(n *models.TNode) *gval {
	t := g.t
	switch n.Kind {
	case models.TLiteral:
		return &gval{kind: 'r', raw: n.Literal}
	case models.TObject:
		v := &gval{kind: 'o'}
		for _, f := range n.Fields {
			var fv *gval
			if f.Node.Kind == models.TSum {
				fv = g.sum(f.Node.Sum, v)
			} else {
				fv = g.draw(f.Node)
			}
			v.fields = append(v.fields, gfield{f.Name, fv})
		}
		return v
	case models.TList:
		v := &gval{kind: 'a'}
		for _, e := range n.Elems {
			v.list = append(v.list, g.draw(e))
		}
		return v
	case models.TChoices:
		return &gval{kind: 'r', raw: n.Choices[drawChoice(t, n.Weights, len(n.Choices))]}
	case models.TInt:
		v := int64(drawRange(t, g.s.rangeFor(n.Int, nil), "int"))
		if n.Seq != "" {
			return rawStr(strings.ReplaceAll(n.Seq, "{int}", fmt.Sprint(v)))
		}
		return &gval{kind: 'n', num: v}
	case models.TSeq:
		return rawStr(strings.ReplaceAll(n.Seq, "{n}", fmt.Sprint(g.n)))
	case models.TOutcome:
		return rawStr(g.outcome(n.Outcome))
	case models.TResource:
		ks := g.keys[n.Resource]
		if len(ks) == 0 {
			return &gval{kind: 'r', raw: json.RawMessage("null")}
		}
		if i, ok := g.elem[n.Resource]; ok {
			return rawStr(ks[i%len(ks)])
		}
		return rawStr(ks[rapid.IntRange(0, len(ks)-1).Draw(t, "key:"+n.Resource)])
	case models.TArray:
		return g.array(n)
	case models.TSum:
		return &gval{kind: 'n'} // a sum outside an object has nothing to sum
	}
	return &gval{kind: 'r', raw: json.RawMessage("null")}
}

// array draws an array node: its length (at most the number of keys of any
// resource its items use), then a first key per such resource; element l
// takes key first+l of each.
func (g *bodyGen) array(n *models.TNode) *gval {
	var res []string
	seen := map[string]bool{}
	n.Item.Walk(func(c *models.TNode) {
		if c.Kind == models.TResource && !seen[c.Resource] {
			seen[c.Resource] = true
			res = append(res, c.Resource)
		}
	})
	r := g.s.rangeFor(n.Len, nil)
	for _, name := range res {
		if k := len(g.keys[name]); k > 0 {
			r.Max = min(r.Max, k)
		}
	}
	l := drawRange(g.t, r, "len")
	outer := g.elem
	first := map[string]int{}
	for _, name := range res {
		if k := len(g.keys[name]); k > 0 {
			first[name] = rapid.IntRange(0, k-1).Draw(g.t, "first:"+name)
		}
	}
	v := &gval{kind: 'a'}
	for i := 0; i < l; i++ {
		g.elem = map[string]int{}
		for name, f := range first {
			g.elem[name] = f + i
		}
		v.list = append(v.list, g.draw(n.Item))
	}
	g.elem = outer
	return v
}

// sum is Σ over the elements of obj's field Over of element[Field] ×
// price(element[Price.Key]).
func (g *bodyGen) sum(s *models.SumSpec, obj *gval) *gval {
	arr := obj.field(s.Over)
	var total int64
	if arr != nil {
		for _, e := range arr.list {
			q := e.field(s.Field).number()
			price := int64(1)
			if p := s.Price; p != nil {
				k := e.field(p.Key).str()
				for i, x := range g.keys[p.Resource] {
					if x == k {
						price = p.Values[i%len(p.Values)]
					}
				}
			}
			total += q * price
		}
	}
	return &gval{kind: 'n', num: total}
}

// outcome draws an outcome token at the scenario's rates: decline first,
// then ambiguous (500 or hang, one half each).
func (g *bodyGen) outcome(o *models.OutcomeSpec) string {
	t := g.t
	if o.Allows(models.OutcomeDecline) && chance(t, g.s.DeclineRate, "decline") {
		return o.Token(models.OutcomeDecline, g.n)
	}
	can500, canHang := o.Allows(models.OutcomeAmbiguous500), o.Allows(models.OutcomeAmbiguousHang)
	if (can500 || canHang) && chance(t, g.s.AmbiguousRate, "ambiguous") {
		hang := canHang
		if can500 && canHang {
			hang = rapid.Bool().Draw(t, "hang")
		}
		if hang {
			return o.Token(models.OutcomeAmbiguousHang, g.n)
		}
		return o.Token(models.OutcomeAmbiguous500, g.n)
	}
	return o.Default
}

// drawChoice draws an index: uniform without weights, else by weight
// (integer draws shrink towards the first choice).
func drawChoice(t *rapid.T, weights []float64, n int) int {
	if len(weights) == 0 {
		return rapid.IntRange(0, n-1).Draw(t, "choice")
	}
	total := 0.0
	for _, w := range weights {
		total += w
	}
	x := float64(rapid.IntRange(0, 9999).Draw(t, "choice")) / 10000 * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return n - 1
}
