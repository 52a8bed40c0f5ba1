package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// ParamError is a bad parameter of one fault: it names the kind and the
// field (the JSON name).
type ParamError struct {
	Kind, Field, Problem string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%s: parameter %s: %s", e.Kind, e.Field, e.Problem)
}

// Bad returns a *ParamError for kind k, for use in Validate.
func Bad(k Kind, field, format string, a ...any) error {
	return &ParamError{Kind: k.Name(), Field: field, Problem: fmt.Sprintf(format, a...)}
}

// Stream is the direction of a link a toxic acts on (toxiproxy's stream).
type Stream string

// Streams.
const (
	// Downstream is server → client: the answers.
	Downstream Stream = "downstream"
	// Upstream is client → server: the requests.
	Upstream Stream = "upstream"
)

// Check validates s as the value of field of kind k.
func (s Stream) Check(k Kind, field string) error {
	if s != Downstream && s != Upstream {
		return Bad(k, field, "%q is not %q or %q", string(s), Upstream, Downstream)
	}
	return nil
}

// Decode reads a fault's parameters from raw (a JSON object; empty or null:
// the defaults) onto a fresh value of kind name, then validates them. An
// unknown parameter, a value of the wrong type and a value Validate refuses
// are all errors naming the field. For the files written before parameters
// were typed, a number or a boolean may be given as a JSON string ("3").
func Decode(name string, raw json.RawMessage) (Kind, error) {
	k, err := New(name)
	if err != nil {
		return nil, err
	}
	if err := Overlay(k, raw); err != nil {
		return nil, err
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k, nil
}

// Overlay decodes the parameters present in raw onto k, leaving the others
// as they are; it does not validate. Errors are *ParamError.
func Overlay(k Kind, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return &ParamError{Kind: k.Name(), Field: "params", Problem: "want a JSON object of parameters, got " + abbreviate(raw)}
	}
	v := reflect.ValueOf(k).Elem()
	byName := paramFields(v.Type())
	keys := make([]string, 0, len(fields))
	for key := range fields {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		idx, ok := byName[key]
		if !ok {
			known := make([]string, 0, len(byName))
			for n := range byName {
				known = append(known, n)
			}
			sort.Strings(known)
			if len(known) == 0 {
				return &ParamError{Kind: k.Name(), Field: key, Problem: "unknown parameter (this kind has none)"}
			}
			return &ParamError{Kind: k.Name(), Field: key, Problem: "unknown parameter (known: " + strings.Join(known, ", ") + ")"}
		}
		fv := v.Field(idx)
		if err := decodeField(fv, fields[key]); err != nil {
			return &ParamError{Kind: k.Name(), Field: key, Problem: err.Error()}
		}
	}
	return nil
}

func decodeField(fv reflect.Value, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	// A scalar written as a string by an older harness ("count": "2").
	if len(raw) > 0 && raw[0] == '"' && fv.Kind() != reflect.String {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return fmt.Errorf("want an integer, got %q", s)
			}
			fv.SetInt(n)
			return nil
		case reflect.Float32, reflect.Float64:
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return fmt.Errorf("want a number, got %q", s)
			}
			fv.SetFloat(x)
			return nil
		case reflect.Bool:
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("want true or false, got %q", s)
			}
			fv.SetBool(b)
			return nil
		}
	}
	p := reflect.New(fv.Type())
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("want %s, got %s", typeName(fv.Type()), te.Value)
		}
		return err
	}
	fv.Set(p.Elem())
	return nil
}

// paramFields maps each parameter's JSON name to its field index.
func paramFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if n := jsonName(t.Field(i)); n != "" {
			out[n] = i
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		name = f.Name
	}
	return name
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

func abbreviate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// Param describes one parameter of a kind, for `sagachaos list faults`.
type Param struct {
	Name    string
	Type    string
	Default string
	Doc     string
}

// Params describes the parameters of k (with k's values as defaults).
func Params(k Kind) []Param {
	v := reflect.ValueOf(k).Elem()
	t := v.Type()
	var out []Param
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		n := jsonName(f)
		if n == "" {
			continue
		}
		typ := strings.TrimPrefix(typeName(f.Type), "an ")
		typ = strings.TrimPrefix(typ, "a ")
		if typ == "true or false" {
			typ = "bool"
		}
		out = append(out, Param{Name: n, Type: typ, Default: fmt.Sprint(v.Field(i).Interface()), Doc: f.Tag.Get("doc")})
	}
	return out
}

// Strings flattens k's parameters into the string map a journal entry
// carries.
func Strings(k Kind) map[string]string {
	out := map[string]string{}
	for _, p := range Params(k) {
		out[p.Name] = p.Default
	}
	return out
}
