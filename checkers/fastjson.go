package checkers

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/sagachaos/sagachaos/models"
)

// A small decoder for the flat values that make up most of a history
// (events, outbox rows, applied records, world effects). encoding/json's
// reflection costs several microseconds per op; this scanner keeps the
// checkers well above 500k ops/s. It must agree with encoding/json on every
// input (FuzzFastDecode checks it differentially): it accepts only what is
// valid JSON — strictly, as encoding/json would: no trailing comma, no
// missing one, no leading zero, no raw control character in a string, no
// trailing data — and it gives up, the caller then falling back to
// encoding/json, on anything it does not expect: an escape or invalid UTF-8
// in a string (encoding/json replaces it with U+FFFD), a key matching a
// field only case-insensitively, a number that is not a plain integer, a
// value of the wrong kind, nesting deeper than maxDepth.

// maxDepth bounds the nesting the scanner follows before it gives up.
const maxDepth = 64

// scanObject calls f for every top-level member of the JSON object b, with
// the key's bytes and the value's raw bytes. It reports false when b is not
// an object it can scan or when f returns false.
func scanObject(b []byte, f func(k, v []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		ke, slow := strEnd(b, i)
		if ke < 0 || slow {
			return false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		ve := valueEnd(b, i, 0)
		if ve < 0 || !f(key, b[i:ve]) {
			return false
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// strEnd returns the index after the closing quote of the JSON string
// starting at b[i] (-1 if it is not a valid one), and whether its body needs
// encoding/json to decode: an escape, or bytes that are not valid UTF-8.
func strEnd(b []byte, i int) (int, bool) {
	slow, ascii := false, true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !slow && !ascii && !utf8.Valid(b[i+1:j]) {
				slow = true
			}
			return j + 1, slow
		case c == '\\':
			slow = true
			j++
			if j >= len(b) {
				return -1, slow
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return -1, slow
				}
				j += 4
			default:
				return -1, slow
			}
		case c < 0x20:
			return -1, slow
		case c >= 0x80:
			ascii = false
		}
	}
	return -1, slow
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// plain returns the body of v when v is a JSON string that decodes to its
// own bytes (no escape, valid UTF-8): then string(body) is the value.
func plain(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	e, slow := strEnd(v, 0)
	if e != len(v) || slow {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// valueEnd returns the index after the valid JSON value starting at b[i],
// or -1.
func valueEnd(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		e, _ := strEnd(b, i)
		return e
	case c == '{':
		if depth >= maxDepth {
			return -1
		}
		j := skipWS(b, i+1)
		if j < len(b) && b[j] == '}' {
			return j + 1
		}
		for {
			if j >= len(b) || b[j] != '"' {
				return -1
			}
			ke, _ := strEnd(b, j)
			if ke < 0 {
				return -1
			}
			j = skipWS(b, ke)
			if j >= len(b) || b[j] != ':' {
				return -1
			}
			ve := valueEnd(b, skipWS(b, j+1), depth+1)
			if ve < 0 {
				return -1
			}
			j = skipWS(b, ve)
			if j >= len(b) {
				return -1
			}
			switch b[j] {
			case ',':
				j = skipWS(b, j+1)
			case '}':
				return j + 1
			default:
				return -1
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return -1
		}
		j := skipWS(b, i+1)
		if j < len(b) && b[j] == ']' {
			return j + 1
		}
		for {
			ve := valueEnd(b, j, depth+1)
			if ve < 0 {
				return -1
			}
			j = skipWS(b, ve)
			if j >= len(b) {
				return -1
			}
			switch b[j] {
			case ',':
				j = skipWS(b, j+1)
			case ']':
				return j + 1
			default:
				return -1
			}
		}
	case c == 't':
		return literalEnd(b, i, "true")
	case c == 'f':
		return literalEnd(b, i, "false")
	case c == 'n':
		return literalEnd(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return numberEnd(b, i)
	}
	return -1
}

func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func numberEnd(b []byte, i int) int {
	digits := func(j int) int {
		k := j
		for k < len(b) && '0' <= b[k] && b[k] <= '9' {
			k++
		}
		if k == j {
			return -1
		}
		return k
	}
	j := i
	if b[j] == '-' {
		j++
	}
	if j >= len(b) {
		return -1
	}
	if b[j] == '0' {
		j++
	} else if j = digits(j); j < 0 {
		return -1
	}
	if j < len(b) && b[j] == '.' {
		if j = digits(j + 1); j < 0 {
			return -1
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j = digits(j); j < 0 {
			return -1
		}
	}
	return j
}

func jstr(v []byte, dst *string) bool {
	if string(v) == "null" {
		return true
	}
	body, ok := plain(v)
	if !ok {
		return len(v) >= 2 && v[0] == '"' && json.Unmarshal(v, dst) == nil
	}
	*dst = string(body)
	return true
}

// interner shares the strings of low-cardinality fields (topic, source,
// type, consumer, status …) so that decoding them allocates only once per
// distinct value. A nil interner allocates every time.
type interner map[string]string

// maxInterned bounds the table: past it, a field is not low-cardinality.
const maxInterned = 1 << 14

func (in interner) str(v []byte, dst *string) bool {
	body, ok := plain(v)
	if in == nil || !ok {
		return jstr(v, dst)
	}
	if s, ok := in[string(body)]; ok {
		*dst = s
		return true
	}
	*dst = string(body)
	if len(in) < maxInterned {
		in[*dst] = *dst
	}
	return true
}

// same decodes a string that is usually equal to known (an op's order id),
// reusing known's storage when it is.
func same(v []byte, known string, dst *string) bool {
	if body, ok := plain(v); ok && string(body) == known {
		*dst = known
		return true
	}
	return jstr(v, dst)
}

func jint(v []byte, dst *int64) bool {
	if len(v) == 4 && string(v) == "null" {
		return true
	}
	neg := false
	if len(v) > 0 && v[0] == '-' {
		neg, v = true, v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

func jint32(v []byte, dst *int32) bool {
	var n int64
	if !jint(v, &n) || n != int64(int32(n)) {
		return false
	}
	*dst = int32(n)
	return true
}

// jbool decodes a boolean; null leaves dst as it is, as encoding/json does.
func jbool(v []byte, dst *bool) bool {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
}

// unexpected reports whether an unknown key might still be one of fields
// under encoding/json's case-insensitive matching (then: fall back).
func unexpected(k []byte, fields ...string) bool {
	for _, f := range fields {
		if strings.EqualFold(string(k), f) {
			return true
		}
	}
	return false
}

var eventFields = []string{"topic", "partition", "offset", "key", "event_id", "seq", "source", "timestamp_ns", "payload", "malformed"}

// idFunc decodes an event_id, possibly sharing an already-decoded copy.
type idFunc func(v []byte, dst *string) bool

func decodeEvent(raw []byte, r *models.EventRecord, in interner, order string, id idFunc) error {
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "topic":
			return in.str(v, &r.Topic)
		case "partition":
			return jint32(v, &r.Partition)
		case "offset":
			return jint(v, &r.Offset)
		case "key":
			return same(v, order, &r.Key)
		case "event_id":
			return id(v, &r.EventID)
		case "seq":
			return jint(v, &r.Seq)
		case "source":
			return in.str(v, &r.Source)
		case "malformed":
			return jstr(v, &r.Malformed)
		case "timestamp_ns":
			return jint(v, &r.Timestamp)
		case "payload":
			return true
		}
		return !unexpected(k, eventFields...)
	})
	if ok {
		return nil
	}
	*r = models.EventRecord{}
	err := json.Unmarshal(raw, r)
	r.Payload = nil
	return err
}

var rowFields = []string{"db", "id", "event_id", "seq", "type", "topic", "published"}

func decodeRow(raw []byte, r *models.OutboxRow, in interner) error {
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "db":
			return in.str(v, &r.DB)
		case "id":
			return jint(v, &r.ID)
		case "event_id":
			return jstr(v, &r.EventID)
		case "seq":
			return jint(v, &r.Seq)
		case "type":
			return in.str(v, &r.Type)
		case "topic":
			return in.str(v, &r.Topic)
		case "published":
			return jbool(v, &r.Published)
		}
		return !unexpected(k, rowFields...)
	})
	if ok {
		return nil
	}
	*r = models.OutboxRow{}
	return json.Unmarshal(raw, r)
}

var appliedFields = []string{"consumer", "event_id", "source", "type", "seq", "position"}

func decodeApplied(raw []byte, a *models.Applied, in interner, id idFunc) error {
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "consumer":
			return in.str(v, &a.Consumer)
		case "event_id":
			return id(v, &a.EventID)
		case "source":
			return in.str(v, &a.Source)
		case "type":
			return in.str(v, &a.Type)
		case "seq":
			return jint(v, &a.Seq)
		case "position":
			return jint(v, &a.Position)
		}
		return !unexpected(k, appliedFields...)
	})
	if ok {
		return nil
	}
	*a = models.Applied{}
	return json.Unmarshal(raw, a)
}

var effectFields = []string{"status", "kind", "charge_id", "amount", "replay"}

func decodeEffect(raw []byte, e *effectWire, in interner) error {
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "status":
			return in.str(v, &e.Status)
		case "kind":
			return in.str(v, &e.Kind)
		case "charge_id":
			return jstr(v, &e.ChargeID)
		case "amount":
			return jint(v, &e.Amount)
		case "replay":
			return jbool(v, &e.Replay)
		}
		return !unexpected(k, effectFields...)
	})
	if ok {
		return nil
	}
	*e = effectWire{}
	return json.Unmarshal(raw, e)
}

// decodeKey reads only the "key" of a place-order request; the rest is
// decoded on demand (Index.Request).
func decodeKey(raw []byte, key *string) error {
	if len(raw) == 0 {
		return nil
	}
	ok := scanObject(raw, func(k, v []byte) bool {
		if string(k) == "key" {
			return jstr(v, key)
		}
		return !unexpected(k, "key")
	})
	if ok {
		return nil
	}
	var p struct {
		Key string `json:"key"`
	}
	err := json.Unmarshal(raw, &p)
	*key = p.Key
	return err
}

var replyFields = []string{"key", "status", "order", "replayed"}

func decodeReply(raw []byte, r *models.PlaceOrderReply) error {
	if len(raw) == 0 {
		return nil
	}
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "key":
			return jstr(v, &r.Key)
		case "order":
			return jstr(v, &r.Order)
		case "status":
			var n int64
			if !jint(v, &n) || n != int64(int(n)) {
				return false
			}
			r.Status = int(n)
			return true
		case "replayed":
			return jbool(v, &r.Replayed)
		}
		return !unexpected(k, replyFields...)
	})
	if ok {
		return nil
	}
	*r = models.PlaceOrderReply{}
	return json.Unmarshal(raw, r)
}

var orderStateFields = []string{"status", "idempotency_key", "customer", "items", "card", "total", "trail"}

// decodeOrderState decodes an order state; Trail, which no checker reads,
// is decoded only on the slow path.
func decodeOrderState(raw []byte, s *models.OrderState) error {
	ok := scanObject(raw, func(k, v []byte) bool {
		switch string(k) {
		case "status":
			return jstr(v, &s.Status)
		case "idempotency_key":
			return jstr(v, &s.IdempotencyKey)
		case "customer":
			return jstr(v, &s.Customer)
		case "card":
			return jstr(v, &s.Card)
		case "total":
			return jint(v, &s.Total)
		case "items":
			return decodeItems(v, &s.Items)
		case "trail":
			return stringsOrNull(v)
		}
		return !unexpected(k, orderStateFields...)
	})
	if ok {
		return nil
	}
	*s = models.OrderState{}
	err := json.Unmarshal(raw, s)
	s.Trail = nil
	return err
}

// stringsOrNull reports whether v is null or an array of strings: what
// encoding/json would decode into a []string without an error.
func stringsOrNull(v []byte) bool {
	if string(v) == "null" {
		return true
	}
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	i := skipWS(v, 1)
	if i < len(v) && v[i] == ']' {
		return i+1 == len(v)
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return false
		}
		e, _ := strEnd(v, i)
		if e < 0 {
			return false
		}
		i = skipWS(v, e)
		if i >= len(v) {
			return false
		}
		switch v[i] {
		case ',':
			i = skipWS(v, i+1)
		case ']':
			return i+1 == len(v)
		default:
			return false
		}
	}
}

func decodeItems(v []byte, items *[]models.Item) bool {
	if string(v) == "null" {
		*items = nil
		return true
	}
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '[' {
		return false
	}
	out := []models.Item{}
	i = skipWS(v, i+1)
	if i < len(v) && v[i] == ']' {
		*items = out
		return skipWS(v, i+1) == len(v)
	}
	for {
		e := valueEnd(v, i, 1)
		if e < 0 {
			return false
		}
		var it models.Item
		ok := scanObject(v[i:e], func(k, x []byte) bool {
			switch string(k) {
			case "sku":
				return jstr(x, &it.SKU)
			case "qty":
				var n int64
				if !jint(x, &n) || n != int64(int(n)) {
					return false
				}
				it.Qty = int(n)
				return true
			}
			return !unexpected(k, "sku", "qty")
		})
		if !ok {
			return false
		}
		out = append(out, it)
		i = skipWS(v, e)
		if i >= len(v) {
			return false
		}
		switch v[i] {
		case ',':
			i = skipWS(v, i+1)
		case ']':
			*items = out
			return skipWS(v, i+1) == len(v)
		default:
			return false
		}
	}
}
