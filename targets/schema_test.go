package targets

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sagachaos/sagachaos/models"
)

const schemaPath = "../docs/manifest.schema.json"

func compileSchema(t *testing.T, ref string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile(schemaPath + ref)
	if err != nil {
		t.Fatalf("compile %s%s: %v", schemaPath, ref, err)
	}
	return s
}

// repoJSON finds the manifests (JSON objects with processes) and the
// domain files (targets/domains/*.json, targets/testdata/*-domain.json and
// every file a manifest names in domain) of the repository.
func repoJSON(t *testing.T) (manifests, domains []string) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "runs", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".json") || strings.Contains(p, "/testdata/runs/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(b, &top) != nil {
			return nil
		}
		switch {
		case top["processes"] != nil && top["api"] != nil:
			manifests = append(manifests, p)
			var dom string
			if json.Unmarshal(top["domain"], &dom) == nil && dom != "" && dom != OrderDomainName {
				seen[filepath.Clean(filepath.Join(filepath.Dir(p), dom))] = true
			}
		case strings.HasPrefix(p, "../targets/domains/"), strings.HasSuffix(p, "-domain.json"):
			seen[filepath.Clean(p)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range seen {
		domains = append(domains, p)
	}
	return manifests, domains
}

// Every manifest and domain file in the repository is valid against
// docs/manifest.schema.json, and every manifest that is not a deliberately
// broken test input loads.
func TestRepositoryManifestsMatchTheSchema(t *testing.T) {
	manifest := compileSchema(t, "")
	domain := compileSchema(t, "#/$defs/domainFile")
	manifests, domains := repoJSON(t)
	if len(manifests) < 3 || len(domains) < 2 {
		t.Fatalf("found %d manifests and %d domain files: %v %v", len(manifests), len(domains), manifests, domains)
	}
	for _, set := range []struct {
		files []string
		s     *jsonschema.Schema
	}{{manifests, manifest}, {domains, domain}} {
		for _, p := range set.files {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if err := set.s.Validate(v); err != nil {
				t.Errorf("%s does not match the schema: %v", p, err)
			}
		}
	}
	for _, p := range manifests {
		if strings.Contains(p, "/testdata/") && !strings.Contains(p, "/targets/") {
			continue // the CLI's deliberately failing targets
		}
		if _, err := LoadManifest(p); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// The schema refuses what the loader refuses, where a schema can say it.
func TestSchemaRefusesBrokenManifests(t *testing.T) {
	s := compileSchema(t, "")
	for name, body := range map[string]string{
		"unknown field":       `{"name":"x","processes":[{"name":"a","command":["a"]}],"api":{"process":"a"},"ordres":1}`,
		"bad role":            `{"name":"x","processes":[{"name":"a","command":["a"],"role":"boss"}],"api":{"process":"a"}}`,
		"bad step kind":       `{"name":"x","processes":[{"name":"a","command":["a"]}],"api":{"process":"a"},"saga":{"name":"s","pending":"P","success":"S","failure":"F","steps":[{"name":"a","service":"a","kind":"maybe"}]}}`,
		"key without {n}":     `{"name":"x","processes":[{"name":"a","command":["a"]}],"api":{"process":"a"},"workload":{"start":{"path":"/x","body":{},"key":"same"}}}`,
		"world is not a list": `{"name":"x","processes":[{"name":"a","command":["a"]}],"api":{"process":"a"},"world":{"providers":[]}}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: the schema accepts %s", name, body)
		}
	}
}

const minimalProcesses = `"databases":["d"],"topics":[{"name":"events","partitions":1}],
	"processes":[{"name":"api","role":"api","command":["x"],"depends":["postgres","kafka"]}],"api":{"process":"api"}`

// A broken manifest is refused naming the field.
func TestBrokenManifestsNameTheField(t *testing.T) {
	dom := OrderDomain()
	saga, _ := json.Marshal(dom.Saga)
	world, _ := json.Marshal(dom.World)
	wl, _ := json.Marshal(dom.Workload)
	cases := []struct{ name, extra, want string }{
		{"effect of an unknown provider", `"world":[],"saga":` + string(saga) + `,"workload":{"start":{"path":"/x","body":{}},"list":{"path":"/x"}}`,
			`field saga.steps[2].effect.provider: "gateway" is not a provider of world`},
		{"unknown dependency", `"world":` + string(world) + `,"workload":` + strings.Replace(string(wl), `"resource":"stock"`, `"literal":1`, 1) +
			`,"processes":[{"name":"api","command":["x"],"depends":["bank"]}]`, `field processes[0].depends[0]: unknown dependency "bank" (known: postgres, kafka, gateway, carrier, mailer)`},
		{"no workload", `"saga":` + string(saga) + `,"world":` + string(world), "field workload: missing"},
		{"template resource unknown", `"workload":` + string(wl), `field workload.start.body: resource "stock" is not a counted resource of resources`},
		{"bad template", `"workload":{"start":{"path":"/x","body":{"n":{"int":{"min":3,"max":1}}}},"list":{"path":"/x"}}`, "field workload.start.body: /n/int: max 1 is below min 3"},
		{"pivot twice", `"world":` + string(world) + `,"workload":{"start":{"path":"/x","body":{}},"list":{"path":"/x"}},"saga":{"name":"s","pending":"P","success":"S","failure":"F","steps":[{"name":"a","service":"a","kind":"pivot"},{"name":"b","service":"a","kind":"pivot"}]}`,
			"field saga.steps[1].kind: a second pivot (the first is a)"},
		{"compensatable after the pivot", `"workload":{"start":{"path":"/x","body":{}},"list":{"path":"/x"}},"saga":{"name":"s","pending":"P","success":"S","failure":"F","steps":[{"name":"a","service":"a","kind":"pivot"},{"name":"b","service":"a","kind":"compensatable","compensation":{"name":"c"}}]}`,
			"field saga.steps[1].kind: a compensatable step after the pivot (a) could never be compensated"},
		{"same statuses", `"workload":{"start":{"path":"/x","body":{}},"list":{"path":"/x"}},"saga":{"name":"s","pending":"P","success":"P","failure":"F","steps":[{"name":"a","service":"a","kind":"retriable"}]}`,
			"field saga.success: pending, success and failure must be three different statuses"},
		{"payments resource at a plain provider", `"world":[{"name":"bank","actions":[{"name":"pay","path":"/pay","saga":"id"}]}],"workload":{"start":{"path":"/x","body":{}}},"resources":[{"name":"money","kind":"payments","provider":"bank","held_by":{"quantity":"/total"}}]`,
			`field resources[0].provider: "bank" is not a provider of kind payments`},
		{"counted resource without keys", `"workload":{"start":{"path":"/x","body":{}}},"resources":[{"name":"seats"}]`,
			`field resources[0].keys: a counted resource needs keys and initial, or amounts`},
		{"refund without refers", `"world":[{"name":"bank","kind":"payments","actions":[{"name":"pay","path":"/pay","saga":"id","role":"charge"},{"name":"back","path":"/back","role":"refund"}]}],"workload":{"start":{"path":"/x","body":{}}}`,
			`field world[0].actions[1].saga: empty`},
		{"seq", `"workload":{"start":{"path":"/x","body":{}}},"seq":"clock"`, `field seq: "clock" is not "header" or "outbox"`},
		{"type", `"workload":{"start":{"path":"/x","body":{}}},"seq":3`, `field seq: want string`},
		{"status from events without an outbox", `"workload":{"start":{"path":"/x","body":{}}},"saga":{"name":"s","pending":"P","success":"S","failure":"F","status_from":"events","success_event":"A","failure_event":"B","steps":[{"name":"a","service":"a","kind":"retriable"}]}`,
			"field observe.outbox: status_from events reads the outbox rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"name":"x",` + minimalProcesses + `,` + c.extra + `}`
			if strings.Contains(c.extra, `"processes"`) {
				body = `{"name":"x","databases":["d"],"topics":[],"api":{"process":"api"},` + c.extra + `}`
			}
			_, err := ParseManifest([]byte(body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// A manifest in the older format (no domain section) keeps working as the
// order domain: the same saga, world, workload and resources as the
// reference, which names the order domain's file, and observe.stock is the
// stock resource's query.
func TestOlderManifestIsTheOrderDomain(t *testing.T) {
	ref, err := LoadManifest("reference/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("reference/manifest.json")
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw, "domain")
	obs := raw["observe"].(map[string]any)
	delete(obs, "resources")
	obs["stock"] = map[string]any{"db": "inventory", "sql": "SELECT sku, available, reserved FROM stock ORDER BY sku"}
	for _, p := range raw["processes"].([]any) {
		env, _ := p.(map[string]any)["env"].(map[string]any)
		for k, v := range env {
			env[k] = strings.ReplaceAll(v.(string), "{{resource:stock}}", "{{stock}}")
		}
	}
	old, _ := json.Marshal(raw)
	m, err := ParseManifest(old)
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{"saga": {m.Saga, ref.Saga}, "world": {m.World, ref.World}, "workload": {m.Workload, ref.Workload}, "resources": {m.Resources, ref.Resources}} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differs between the older manifest and the reference", name)
		}
	}
	if q, ok := m.ResourceQuery("stock"); !ok || !strings.Contains(q.SQL, "SELECT sku AS key") {
		t.Errorf("older stock query %+v", q)
	}
	for _, p := range m.Processes {
		for _, v := range p.Env {
			if strings.Contains(v, "{{stock}}") {
				t.Errorf("process %s: {{stock}} not mapped to {{resource:stock}}", p.Name)
			}
		}
	}
	var d models.TargetDecl
	m.Declare(&d)
	if d.Saga == nil || d.OutboxOnly || len(d.Resources) != 2 || d.Resources[1].Proc != models.ProcGateway || d.Resources[1].Charge != models.FCharge || d.StartOp != models.FPlaceOrder {
		t.Errorf("declaration %+v", d)
	}
}

// The order domain's file and models.OrderSaga (which judges histories
// that predate the declaration) are one declaration.
func TestOrderDomainIsOrderSaga(t *testing.T) {
	s := *OrderDomain().Saga
	s.Normalize()
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(models.OrderSaga)
	if !bytes.Equal(a, b) {
		t.Fatalf("targets/domains/order.json's saga:\n%s\nmodels.OrderSaga:\n%s", a, b)
	}
	_, legacy := models.LegacyOrderDomain()
	var d models.TargetDecl
	m := &Manifest{Resources: OrderDomain().Resources, World: OrderDomain().World}
	m.Declare(&d)
	for i := range legacy {
		if legacy[i].Name != d.Resources[i].Name || legacy[i].Proc != d.Resources[i].Proc || !reflect.DeepEqual(legacy[i].HeldBy, d.Resources[i].HeldBy) {
			t.Errorf("resource %d: legacy %+v, declared %+v", i, legacy[i], d.Resources[i])
		}
	}
}

// The trip target's domain (a choreographed saga with its own statuses and
// world) is expressible: a manifest naming the file loads.
func TestTripDomainLoads(t *testing.T) {
	body := `{"name":"trip","domain":"trip-domain.json","databases":["trips"],"topics":[{"name":"trips","partitions":2}],
		"processes":[{"name":"trips","role":"api","command":["node","{{dir}}/dist/main.js","trips"],"depends":["postgres","kafka"]},
		             {"name":"flights","role":"consumer","command":["x"],"depends":["postgres","kafka","airline"],"env":{"AIRLINE_URL":"{{url:airline}}"}}],
		"api":{"process":"trips"}}`
	p := filepath.Join(t.TempDir(), "manifest.json")
	b, _ := os.ReadFile("testdata/trip-domain.json")
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "trip-domain.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Saga.Name != "trip" || !m.Saga.Choreographed() || m.Saga.Success != "BOOKED" || len(m.World) != 4 || m.Workload.OpName() != "book-trip" {
		t.Fatalf("trip manifest %+v", m)
	}
	if e := m.Saga.Steps[0].Effect; e.Proc != "world/airline" || e.F != "book" {
		t.Fatalf("effect %+v", e)
	}
}
