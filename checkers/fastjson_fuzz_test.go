package checkers

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// fastDecoders pairs each fast decoder with what encoding/json makes of the
// same bytes (with the fields the fast path deliberately drops cleared).
var fastDecoders = []struct {
	name string
	fast func(b []byte, in interner, order string) (any, error)
	slow func(b []byte) (any, error)
}{
	{"event",
		func(b []byte, in interner, order string) (any, error) {
			var r models.EventRecord
			err := decodeEvent(b, &r, in, order, jstr)
			return r, err
		},
		func(b []byte) (any, error) {
			var r models.EventRecord
			err := json.Unmarshal(b, &r)
			r.Payload = nil
			return r, err
		}},
	{"row",
		func(b []byte, in interner, _ string) (any, error) {
			var r models.OutboxRow
			err := decodeRow(b, &r, in)
			return r, err
		},
		func(b []byte) (any, error) { var r models.OutboxRow; err := json.Unmarshal(b, &r); return r, err }},
	{"applied",
		func(b []byte, in interner, _ string) (any, error) {
			var r models.Applied
			err := decodeApplied(b, &r, in, jstr)
			return r, err
		},
		func(b []byte) (any, error) { var r models.Applied; err := json.Unmarshal(b, &r); return r, err }},
	{"effect",
		func(b []byte, in interner, _ string) (any, error) {
			var r effectWire
			err := decodeEffect(b, &r, in)
			return r, err
		},
		func(b []byte) (any, error) { var r effectWire; err := json.Unmarshal(b, &r); return r, err }},
	{"key",
		func(b []byte, _ interner, _ string) (any, error) {
			var k string
			err := decodeKey(b, &k)
			return k, err
		},
		func(b []byte) (any, error) {
			if len(b) == 0 {
				return "", nil // decodeKey reads an absent value as no key
			}
			var r struct {
				Key string `json:"key"`
			}
			err := json.Unmarshal(b, &r)
			return r.Key, err
		}},
	{"reply",
		func(b []byte, _ interner, _ string) (any, error) {
			var r models.PlaceOrderReply
			err := decodeReply(b, &r)
			return r, err
		},
		func(b []byte) (any, error) {
			var r models.PlaceOrderReply
			if len(b) == 0 {
				return r, nil
			}
			err := json.Unmarshal(b, &r)
			return r, err
		}},
	{"order-state",
		func(b []byte, _ interner, _ string) (any, error) {
			var r models.OrderState
			err := decodeOrderState(b, &r)
			return r, err
		},
		func(b []byte) (any, error) {
			var r models.OrderState
			err := json.Unmarshal(b, &r)
			r.Trail = nil
			return r, err
		}},
}

// fastSeeds are the shapes the decoders meet; the inputs they once got
// wrong are regression cases in testdata/fuzz/FuzzFastDecode/.
var fastSeeds = []string{
	`{"topic":"orders","partition":1,"offset":12,"key":"o-1","event_id":"e-1","seq":3,"source":"orders","timestamp_ns":1700000000000000000,"payload":{"x":[1,{"y":"}"}]}}`,
	`{"db":"orders","id":7,"event_id":"e-1","seq":1,"type":"OrderCreated","topic":"orders","published":true}`,
	`{"consumer":"inventory","event_id":"e-1","source":"orders","type":"ReserveStock","seq":2,"position":5}`,
	`{"status":"succeeded","kind":"charge","charge_id":"ch-1","amount":2500,"replay":false}`,
	`{"key":"k-1","status":202,"order":"o-1","replayed":true}`,
	`{"status":"APPROVED","idempotency_key":"k","customer":"c","items":[{"sku":"a","qty":2}],"card":"4242","total":5,"trail":["created","approved"]}`,
	`{"topic":"a\"b","key":"o\\1"}`,
	`{"items":[{"sku":"a","qty":2.5}]}`,
	`{"partition":3000000000}`,
	`{"seq":-0,"offset":1e2}`,
	`[1,2]`, `null`, ``, `"x"`, `{}`, ` { } `,
}

// FuzzFastDecode is a differential fuzz of the fast decoders against
// encoding/json: on every input either both fail or both succeed with the
// same value (issue 10 item 15: it accepted {"seq":1,} and kept invalid
// UTF-8 that encoding/json replaces).
func FuzzFastDecode(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s), "o-1")
	}
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, file := range files[:min(len(files), 6)] {
		h, err := models.ReadHistoryFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, op := range h.Ops[:min(len(h.Ops), 40)] {
			if len(op.Value) > 0 {
				f.Add([]byte(op.Value), op.Order)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, order string) {
		in := interner{}
		for _, d := range fastDecoders {
			want, werr := d.slow(b)
			// Twice through one interner: the second call takes the
			// interned strings.
			for pass := 0; pass < 2; pass++ {
				got, gerr := d.fast(b, in, order)
				if (gerr == nil) != (werr == nil) || (gerr == nil && !reflect.DeepEqual(got, want)) {
					t.Fatalf("%s (pass %d) of %q (order %q):\n fast          %#v (err %v)\n encoding/json %#v (err %v)", d.name, pass, b, order, got, gerr, want, werr)
				}
			}
		}
	})
}
