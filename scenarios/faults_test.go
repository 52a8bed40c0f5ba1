package scenarios

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// TestFaultParamsAreStrict: a scenario.json fault with an unknown kind, an
// unknown parameter or a bad value does not load, and the error names the
// fault and the field; the string-typed parameters older harnesses wrote
// still load.
func TestFaultParamsAreStrict(t *testing.T) {
	cases := []struct {
		name, json string
		want       string // "" = loads
	}{
		{"typed", `{"id":"f1","kind":"latency","target":"a→b","params":{"latency_ms":30,"stream":"upstream"}}`, ""},
		{"legacy strings", `{"id":"f1","kind":"kafka-produce-err","params":{"count":"2"}}`, ""},
		{"legacy failpoint", `{"id":"f1","kind":"failpoint","target":"relay.after-mark","params":{"action":"crash","component":"relay-2","hit":"1"}}`, ""},
		{"no params", `{"id":"f1","kind":"kill","target":"relay-1"}`, ""},
		{"unknown kind", `{"id":"f2","kind":"meteor","target":"x"}`, `fault f2: unknown fault kind "meteor"`},
		{"unknown parameter", `{"id":"f3","kind":"latency","params":{"latency_msx":30}}`, "fault f3 (latency): field params.latency_msx: unknown parameter (known: jitter_ms, latency_ms, stream)"},
		{"parameter of a kind without any", `{"id":"f3","kind":"kill","params":{"signal":"TERM"}}`, "fault f3 (kill): field params.signal: unknown parameter (this kind has none)"},
		{"bad value", `{"id":"f4","kind":"latency","params":{"latency_ms":-5}}`, "fault f4 (latency): field params.latency_ms: -5 is negative"},
		{"bad string number", `{"id":"f5","kind":"kafka-commit-err","params":{"count":"two"}}`, `fault f5 (kafka-commit-err): field params.count: want an integer, got "two"`},
		{"wrong type", `{"id":"f6","kind":"gateway-ambiguous","params":{"mode":500}}`, "fault f6 (gateway-ambiguous): field params.mode: want a string, got number"},
		{"bad stream", `{"id":"f7","kind":"blackhole","params":{"stream":"sideways"}}`, `fault f7 (blackhole): field params.stream: "sideways" is not "upstream" or "downstream"`},
		{"bad action", `{"id":"f8","kind":"failpoint","params":{"component":"relay-1","action":"explode","hit":1}}`, `fault f8 (failpoint): field params.action: "explode" is not crash, error or sleep(DURATION)`},
		{"params not an object", `{"id":"f9","kind":"latency","params":[1]}`, "fault f9 (latency): field params.params: want a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f Fault
			err := json.Unmarshal([]byte(c.json), &f)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if f.Params == nil || f.Params.Validate() != nil {
					t.Fatalf("params %+v", f.Params)
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded %+v", f)
			}
			var fe *FaultError
			if !errors.As(err, &fe) {
				t.Fatalf("%v (%T) is not a *FaultError", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestLegacyParamsKeepTheirValues(t *testing.T) {
	var f Fault
	if err := json.Unmarshal([]byte(`{"id":"f1","kind":"failpoint","target":"relay.after-mark","params":{"action":"crash","component":"relay-2","hit":"4"}}`), &f); err != nil {
		t.Fatal(err)
	}
	fp := f.Params.(*faults.Failpoint)
	if fp.Component != "relay-2" || fp.Action != "crash" || fp.Hit != 4 {
		t.Fatalf("read %+v", fp)
	}
	b, _ := json.Marshal(f)
	if !strings.Contains(string(b), `"hit":4`) {
		t.Fatalf("written back as %s", b)
	}
}

// TestSpecFixesParams: a scenario file may fix parameters per kind; a bad
// one is refused naming the file, the kind and the field, and a good one
// is in every drawn fault of the kind.
func TestSpecFixesParams(t *testing.T) {
	base := `{"name":"x","orders":{"min":20,"max":20},"clients":{"min":1,"max":1},"skus":{"min":1,"max":1},"stock":{"min":5,"max":5},
	"qty":{"min":1,"max":1},"lines":{"min":1,"max":1},"gap_ms":{"min":0,"max":0},"relays":{"min":2,"max":2},
	"faults":{"count":{"min":6,"max":6},"kinds":["latency","blackhole"],"duration_ms":{"min":10,"max":10},"params":%s},
	"limits":{"time_limit":"10s","quiesce":"10s","client_timeout":"1s"}}`
	bad := []struct{ params, want string }{
		{`{"latency":{"latency_msx":1}}`, "scenario f.json: field faults.params.latency.latency_msx: unknown parameter"},
		{`{"latency":{"latency_ms":-1}}`, "scenario f.json: field faults.params.latency.latency_ms: -1 is negative"},
		{`{"latency":{"stream":"up"}}`, `scenario f.json: field faults.params.latency.stream: "up" is not`},
		{`{"meteor":{}}`, `scenario f.json: field faults.params.meteor: unknown fault kind "meteor"`},
	}
	for _, c := range bad {
		_, err := ParseSpec("f.json", []byte(strings.Replace(base, "%s", c.params, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("params %s: error %v, want %q", c.params, err, c.want)
		}
	}
	s, err := ParseSpec("f.json", []byte(strings.Replace(base, "%s", `{"latency":{"stream":"upstream","jitter_ms":7},"blackhole":{"stream":"upstream"}}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Generate(s, 3, testCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Faults) == 0 {
		t.Fatal("no faults drawn")
	}
	for _, f := range sc.Faults {
		switch p := f.Params.(type) {
		case *faults.Latency:
			if p.Stream != faults.Upstream || p.JitterMS != 7 || p.LatencyMS < 20 {
				t.Errorf("latency %+v: the fixed params are not laid over the drawn ones", p)
			}
		case *faults.Blackhole:
			if p.Stream != faults.Upstream {
				t.Errorf("blackhole %+v", p)
			}
		default:
			t.Errorf("unexpected fault %+v", f)
		}
	}
}
