package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A body template is the JSON body of a saga start with generator nodes
// where the generator draws values (docs/target-contract.md, "Body
// templates"). A generator node is an object with exactly one of these
// shapes; any other JSON is a literal:
//
//	{"choices": [v, …], "weights": [w, …]}   one of the values (weights optional)
//	{"int": {"min": a, "max": b, "param": p}} an integer in [a, b]
//	{"int": {…}, "format": "FL-{int}"}       that integer written into a string
//	{"seq": "c-{n}"}                          the saga's number n (from 1) in a string
//	{"outcome": {"default": d, "format": f, "allow": [...]}}
//	                                          an outcome token (decline, ambiguous_500,
//	                                          ambiguous_hang) at the scenario's rates,
//	                                          written by f ({outcome}, {n}), else d
//	{"resource": "stock"}                     a key of a counted resource
//	{"array": {"len": {"min","max","param"}, "item": node}}
//	                                          an array; resource nodes inside its items
//	                                          take distinct consecutive keys from a drawn
//	                                          first key, and its length is at most the
//	                                          number of keys
//	{"sum": {"over": f, "field": q, "price": {"resource", "key", "values"}}}
//	                                          Σ over the array field f drawn before it of
//	                                          element[q] × values[index of element[key]
//	                                          among the resource's keys mod len(values)]
//	                                          (× 1 without price)
//	{"literal": v}                            v as it is
//
// Objects keep their fields in the order written, and fields are drawn in
// that order (a sum reads a field drawn before it).

// TNode kinds.
const (
	TLiteral  = "literal"
	TObject   = "object"
	TList     = "list"
	TChoices  = "choices"
	TInt      = "int"
	TSeq      = "seq"
	TOutcome  = "outcome"
	TResource = "resource"
	TArray    = "array"
	TSum      = "sum"
)

// TNode is one parsed template node.
type TNode struct {
	Kind string
	// Literal is the value of a literal; Choices the values of a choices
	// node (Weights parallel, nil: uniform).
	Literal json.RawMessage
	Choices []json.RawMessage
	Weights []float64
	// Fields of an object, in order; Elems of a literal list.
	Fields []TField
	Elems  []*TNode
	// Int and Len are the ranges of an int and an array node.
	Int, Len Range
	// Seq is the format of a seq node, or of an int node written as a
	// string ({int}).
	Seq string
	// Outcome of an outcome node.
	Outcome *OutcomeSpec
	// Resource names the resource of a resource node.
	Resource string
	// Item of an array node.
	Item *TNode
	// Sum of a sum node.
	Sum *SumSpec
}

// TField is one field of an object node.
type TField struct {
	Name string
	Node *TNode
}

// OutcomeSpec is an outcome node: Default when the generator draws no
// outcome token, else Format with {outcome} and {n} replaced. Allow limits
// the tokens drawn (empty: all three).
type OutcomeSpec struct {
	Default string   `json:"default"`
	Format  string   `json:"format,omitempty"`
	Allow   []string `json:"allow,omitempty"`
}

// Allows reports whether the node may draw token.
func (o OutcomeSpec) Allows(token string) bool {
	if len(o.Allow) == 0 {
		return true
	}
	for _, a := range o.Allow {
		if a == token {
			return true
		}
	}
	return false
}

// Token writes an outcome token for saga n.
func (o OutcomeSpec) Token(token string, n int) string {
	f := o.Format
	if f == "" {
		f = "{outcome}"
	}
	return strings.ReplaceAll(strings.ReplaceAll(f, "{outcome}", token), "{n}", itoa(n))
}

// SumSpec is a sum node.
type SumSpec struct {
	Over  string     `json:"over"`
	Field string     `json:"field"`
	Price *PriceSpec `json:"price,omitempty"`
}

// PriceSpec gives each key of a resource a value, by the key's index.
type PriceSpec struct {
	Resource string  `json:"resource"`
	Key      string  `json:"key"`
	Values   []int64 `json:"values"`
}

// TemplateError is a bad template: Path is where (a JSON pointer into the
// body).
type TemplateError struct {
	Path, Problem string
}

func (e *TemplateError) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// ParseTemplate parses a body template.
func ParseTemplate(raw json.RawMessage) (*TNode, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &TemplateError{Problem: "empty template"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseNode(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &TemplateError{Problem: "trailing data after the template"}
	}
	return n, nil
}

// ordered is a JSON value decoded with object key order kept.
type ordered struct {
	obj  []orderedField // object
	list []*ordered     // array
	raw  json.RawMessage
	kind byte // 'o', 'a', 's' (scalar)
}

type orderedField struct {
	name string
	val  *ordered
}

func readOrdered(dec *json.Decoder) (*ordered, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := readOrdered(dec)
				if err != nil {
					return nil, err
				}
				o.obj = append(o.obj, orderedField{k, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			o := &ordered{kind: 'a'}
			for dec.More() {
				v, err := readOrdered(dec)
				if err != nil {
					return nil, err
				}
				o.list = append(o.list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return &ordered{kind: 's', raw: b}, nil
	}
}

// json re-encodes an ordered value, keeping key order.
func (o *ordered) json() json.RawMessage {
	switch o.kind {
	case 'o':
		var b bytes.Buffer
		b.WriteByte('{')
		for i, f := range o.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f.name)
			b.Write(k)
			b.WriteByte(':')
			b.Write(f.val.json())
		}
		b.WriteByte('}')
		return b.Bytes()
	case 'a':
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range o.list {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(e.json())
		}
		b.WriteByte(']')
		return b.Bytes()
	}
	return o.raw
}

func parseNode(dec *json.Decoder, path string) (*TNode, error) {
	o, err := readOrdered(dec)
	if err != nil {
		return nil, &TemplateError{Path: path, Problem: "malformed JSON: " + err.Error()}
	}
	return fromOrdered(o, path)
}

func strictDecode(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func fromOrdered(o *ordered, path string) (*TNode, error) {
	bad := func(at, format string, a ...any) error {
		return &TemplateError{Path: at, Problem: fmt.Sprintf(format, a...)}
	}
	switch o.kind {
	case 's':
		return &TNode{Kind: TLiteral, Literal: o.raw}, nil
	case 'a':
		n := &TNode{Kind: TList}
		for i, e := range o.list {
			c, err := fromOrdered(e, fmt.Sprintf("%s/%d", path, i))
			if err != nil {
				return nil, err
			}
			n.Elems = append(n.Elems, c)
		}
		return n, nil
	}
	keys := make([]string, len(o.obj))
	for i, f := range o.obj {
		keys[i] = f.name
	}
	get := func(k string) *ordered {
		for _, f := range o.obj {
			if f.name == k {
				return f.val
			}
		}
		return nil
	}
	form := strings.Join(keys, ",")
	switch form {
	case "literal":
		return &TNode{Kind: TLiteral, Literal: get("literal").json()}, nil
	case "choices", "choices,weights", "weights,choices":
		c := get("choices")
		if c.kind != 'a' || len(c.list) == 0 {
			return nil, bad(path+"/choices", "want a non-empty array of values")
		}
		n := &TNode{Kind: TChoices}
		for _, e := range c.list {
			n.Choices = append(n.Choices, e.json())
		}
		if w := get("weights"); w != nil {
			if err := json.Unmarshal(w.json(), &n.Weights); err != nil || len(n.Weights) != len(n.Choices) {
				return nil, bad(path+"/weights", "want %d non-negative numbers, one per choice", len(n.Choices))
			}
			total := 0.0
			for _, x := range n.Weights {
				if x < 0 {
					return nil, bad(path+"/weights", "weight %v is negative", x)
				}
				total += x
			}
			if total <= 0 {
				return nil, bad(path+"/weights", "weights sum to 0")
			}
		}
		return n, nil
	case "int", "int,format", "format,int":
		n := &TNode{Kind: TInt}
		if f := get("format"); f != nil {
			if err := json.Unmarshal(f.json(), &n.Seq); err != nil || !strings.Contains(n.Seq, "{int}") {
				return nil, bad(path+"/format", "want a string with {int}")
			}
		}
		if err := strictDecode(get("int").json(), &n.Int); err != nil {
			return nil, bad(path+"/int", "want {\"min\": a, \"max\": b}: %v", err)
		}
		if n.Int.Max < n.Int.Min {
			return nil, bad(path+"/int", "max %d is below min %d", n.Int.Max, n.Int.Min)
		}
		return n, nil
	case "seq":
		n := &TNode{Kind: TSeq}
		if err := json.Unmarshal(get("seq").json(), &n.Seq); err != nil {
			return nil, bad(path+"/seq", "want a string with {n}")
		}
		return n, nil
	case "outcome":
		n := &TNode{Kind: TOutcome, Outcome: &OutcomeSpec{}}
		if err := strictDecode(get("outcome").json(), n.Outcome); err != nil {
			return nil, bad(path+"/outcome", "want {\"default\", \"format\", \"allow\"}: %v", err)
		}
		for i, a := range n.Outcome.Allow {
			if a != OutcomeDecline && a != OutcomeAmbiguous500 && a != OutcomeAmbiguousHang {
				return nil, bad(fmt.Sprintf("%s/outcome/allow/%d", path, i), "unknown outcome %q (known: decline, ambiguous_500, ambiguous_hang)", a)
			}
		}
		return n, nil
	case "resource":
		n := &TNode{Kind: TResource}
		if err := json.Unmarshal(get("resource").json(), &n.Resource); err != nil || n.Resource == "" {
			return nil, bad(path+"/resource", "want a resource name")
		}
		return n, nil
	case "array":
		a := get("array")
		if a.kind != 'o' {
			return nil, bad(path+"/array", "want {\"len\": {…}, \"item\": …}")
		}
		n := &TNode{Kind: TArray}
		var haveLen bool
		for _, f := range a.obj {
			switch f.name {
			case "len":
				haveLen = true
				if err := strictDecode(f.val.json(), &n.Len); err != nil {
					return nil, bad(path+"/array/len", "want {\"min\": a, \"max\": b}: %v", err)
				}
				if n.Len.Min < 0 || n.Len.Max < n.Len.Min {
					return nil, bad(path+"/array/len", "want 0 ≤ min ≤ max")
				}
			case "item":
				it, err := fromOrdered(f.val, path+"/array/item")
				if err != nil {
					return nil, err
				}
				n.Item = it
			default:
				return nil, bad(path+"/array/"+f.name, "unknown field (want len, item)")
			}
		}
		if !haveLen || n.Item == nil {
			return nil, bad(path+"/array", "needs len and item")
		}
		return n, nil
	case "sum":
		n := &TNode{Kind: TSum, Sum: &SumSpec{}}
		if err := strictDecode(get("sum").json(), n.Sum); err != nil {
			return nil, bad(path+"/sum", "want {\"over\", \"field\", \"price\"}: %v", err)
		}
		if n.Sum.Over == "" || n.Sum.Field == "" {
			return nil, bad(path+"/sum", "needs over and field")
		}
		if p := n.Sum.Price; p != nil && (p.Resource == "" || p.Key == "" || len(p.Values) == 0) {
			return nil, bad(path+"/sum/price", "needs resource, key and values")
		}
		return n, nil
	}
	n := &TNode{Kind: TObject}
	for _, f := range o.obj {
		c, err := fromOrdered(f.val, path+"/"+f.name)
		if err != nil {
			return nil, err
		}
		n.Fields = append(n.Fields, TField{f.name, c})
	}
	return n, nil
}

// Walk calls f on n and every node below it.
func (n *TNode) Walk(f func(*TNode)) {
	if n == nil {
		return
	}
	f(n)
	for _, c := range n.Fields {
		c.Node.Walk(f)
	}
	for _, e := range n.Elems {
		e.Walk(f)
	}
	n.Item.Walk(f)
}

// Pointer resolves a JSON pointer (RFC 6901) in a decoded JSON value; ""
// is the value itself.
func Pointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i := 0
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
