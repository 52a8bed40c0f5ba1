package checkers

import (
	"encoding/json"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// A small decoder for the flat values that make up most of a history
// (events, outbox rows, applied records, world effects). encoding/json's
// reflection costs several microseconds per op; this scanner keeps the
// checkers well above 500k ops/s. It only has to handle valid JSON (both
// ReadHistory and the Recorder guarantee it) and it gives up — the caller
// then falls back to encoding/json — on anything it does not expect: an
// escaped key, a key matching a field only case-insensitively, a number
// that is not a plain integer, a value of the wrong kind.

// scanObject calls f for every top-level member of the JSON object b, with
// the key's bytes and the value's raw bytes. It reports false when b is not
// an object it can scan or when f returns false.
func scanObject(b []byte, f func(k, v []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		ke, esc := strEnd(b, i)
		if ke < 0 || esc {
			return false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		ve := valueEnd(b, i)
		if ve < 0 || !f(key, b[i:ve]) {
			return false
		}
		i = ve
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// strEnd returns the index after the closing quote of the string starting
// at b[i], and whether it contains an escape.
func strEnd(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// valueEnd returns the index after the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		e, _ := strEnd(b, i)
		return e
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, _ := strEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		return j
	}
}

func jstr(v []byte, dst *string) bool {
	if len(v) == 4 && string(v) == "null" {
		return true
	}
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' {
			return json.Unmarshal(v, dst) == nil
		}
	}
	*dst = string(v[1 : len(v)-1])
	return true
}

// interner shares the strings of low-cardinality fields (topic, source,
// type, consumer, status …) so that decoding them allocates only once per
// distinct value. A nil interner allocates every time.
type interner map[string]string

// maxInterned bounds the table: past it, a field is not low-cardinality.
const maxInterned = 1 << 14

func (in interner) str(v []byte, dst *string) bool {
	if in == nil || len(v) < 2 || v[0] != '"' {
		return jstr(v, dst)
	}
	body := v[1 : len(v)-1]
	if s, ok := in[string(body)]; ok {
		*dst = s
		return true
	}
	if !jstr(v, dst) {
		return false
	}
	if len(in) < maxInterned && string(body) == *dst {
		in[*dst] = *dst
	}
	return true
}

// same decodes a string that is usually equal to known (an op's order id),
// reusing known's storage when it is.
func same(v []byte, known string, dst *string) bool {
	if len(v) >= 2 && v[0] == '"' && string(v[1:len(v)-1]) == known {
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

func jbool(v []byte, dst *bool) bool {
	switch string(v) {
	case "true":
		*dst = true
	case "false", "null":
		*dst = false
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
			return true
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
	for i++; ; {
		i = skipWS(v, i)
		if i >= len(v) {
			return false
		}
		if v[i] == ']' {
			*items = out
			return true
		}
		if v[i] == ',' {
			i++
			continue
		}
		e := valueEnd(v, i)
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
		i = e
	}
}
