package targets

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// maxFuzzInstances bounds what one accepted manifest may make the harness
// start; Validate refuses more.
const maxFuzzInstances = MaxReplicas

// FuzzParseManifest: a manifest is untrusted input (--target path.json).
// ParseManifest never panics; it accepts one JSON value and nothing after
// it; what it accepts survives a round trip unchanged; and the instances it
// asks for are bounded.
func FuzzParseManifest(f *testing.F) {
	if b, err := os.ReadFile("reference/manifest.json"); err == nil {
		f.Add(b)
	} else {
		f.Fatal(err)
	}
	f.Add([]byte(`{"name":"t","processes":[{"name":"a","command":["x"],"replicas":3}],"api":{"process":"a"}}`))
	f.Add([]byte(`{"name":"t","databases":["d"],"processes":[{"name":"a","command":["x"]}],"api":{"process":"a"},"observe":{"stock":{"db":"d","sql":"select 1"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted a manifest that is not one JSON value: %q", b)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal an accepted manifest: %v", err)
		}
		m2, err := ParseManifest(again)
		if err != nil {
			t.Fatalf("an accepted manifest does not parse again: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
		for _, p := range m.Processes {
			if p.Replicas > maxFuzzInstances {
				t.Fatalf("process %s: %d replicas accepted", p.Name, p.Replicas)
			}
			if n := len(p.Instances()); n < 1 || n > maxFuzzInstances {
				t.Fatalf("process %s: %d instances", p.Name, n)
			}
		}
	})
}
