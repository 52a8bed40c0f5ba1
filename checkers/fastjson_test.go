package checkers

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// The fast decoder must agree with encoding/json on every value it is given:
// on every op of the fixtures, and on the awkward cases below.
func TestFastDecodeAgreesWithEncodingJSON(t *testing.T) {
	var raws [][]byte
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, f := range files {
		h, err := models.ReadHistoryFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range h.Ops {
			if len(op.Value) > 0 && op.Value[0] == '{' {
				raws = append(raws, op.Value)
			}
		}
	}
	awkward := []string{
		`{"topic":"a\"b","partition":1,"offset":12,"key":"o-1","event_id":"e\u0031","seq":3,"source":"orders","payload":{"x":[1,{"y":"}"}]}}`,
		`{"Topic":"upper","Seq":2}`,
		`{"topic":"t","timestamp_ns":1700000000000000000,"seq":1}`,
		`{"seq":1e2,"offset":-5}`,
		`{"amount":12.5,"status":"succeeded"}`,
		`{ "db" : "orders" , "id" : 7 , "published" : true , "extra" : null }`,
		`{"status":null,"replay":null,"amount":null}`,
		`{"position":99999999999999999999}`,
		`{"consumer":"c","event_id":"x","seq":-1,"position":0,"unknown":[1,2,"]"]}`,
		`{"status":"APPROVED","items":[{"sku":"a","qty":2},{"sku":"b\u0041","qty":1}],"total":5,"trail":["x"]}`,
		`{"status":"APPROVED","items":[],"key":"k","order":"o","replayed":true}`,
		`{"items":[{"sku":"a","qty":2.5}]}`,
		`{"items":null,"status":202}`,
	}
	for _, a := range awkward {
		raws = append(raws, []byte(a))
	}
	for _, raw := range raws {
		check := func(name string, fast func([]byte) (any, error), slow func([]byte) (any, error)) {
			fv, ferr := fast(raw)
			sv, serr := slow(raw)
			if (ferr == nil) != (serr == nil) || (ferr == nil && !reflect.DeepEqual(fv, sv)) {
				t.Errorf("%s %s: fast %+v (%v), encoding/json %+v (%v)", name, raw, fv, ferr, sv, serr)
			}
		}
		check("event", func(b []byte) (any, error) {
			var r models.EventRecord
			err := decodeEvent(b, &r, interner{}, "o-1", jstr)
			return r, err
		},
			func(b []byte) (any, error) {
				var r models.EventRecord
				err := json.Unmarshal(b, &r)
				r.Payload = nil
				return r, err
			})
		check("row", func(b []byte) (any, error) {
			var r models.OutboxRow
			err := decodeRow(b, &r, interner{})
			return r, err
		},
			func(b []byte) (any, error) { var r models.OutboxRow; err := json.Unmarshal(b, &r); return r, err })
		check("applied", func(b []byte) (any, error) {
			var r models.Applied
			err := decodeApplied(b, &r, interner{}, jstr)
			return r, err
		},
			func(b []byte) (any, error) { var r models.Applied; err := json.Unmarshal(b, &r); return r, err })
		check("order-state", func(b []byte) (any, error) { var r models.OrderState; err := decodeOrderState(b, &r); return r, err },
			func(b []byte) (any, error) {
				var r models.OrderState
				err := json.Unmarshal(b, &r)
				r.Trail = nil
				return r, err
			})
		check("reply", func(b []byte) (any, error) { var r models.PlaceOrderReply; err := decodeReply(b, &r); return r, err },
			func(b []byte) (any, error) { var r models.PlaceOrderReply; err := json.Unmarshal(b, &r); return r, err })
		check("key", func(b []byte) (any, error) { var k string; err := decodeKey(b, &k); return k, err },
			func(b []byte) (any, error) {
				var r struct {
					Key string `json:"key"`
				}
				err := json.Unmarshal(b, &r)
				return r.Key, err
			})
		check("effect", func(b []byte) (any, error) { var r effectWire; err := decodeEffect(b, &r, interner{}); return r, err },
			func(b []byte) (any, error) { var r effectWire; err := json.Unmarshal(b, &r); return r, err })
	}
}
