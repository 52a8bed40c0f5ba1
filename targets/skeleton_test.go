package targets

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sagachaos/sagachaos/models"
)

// TestSkeletonLoads: the skeleton `sagachaos init` writes parses and
// validates as it is, comments included, and shows a whole small service:
// the roles and consumers, a saga with every kind of step and effects at a
// payments provider, a workload with read and list, and a counted and a
// payments resource to conserve.
func TestSkeletonLoads(t *testing.T) {
	b := Skeleton("myservice")
	m, err := ParseManifest(b)
	if err != nil {
		t.Fatalf("skeleton does not load: %v\n%s", err, b)
	}
	if m.Name != "myservice" || m.API.Process != "orders" || len(m.Processes) != 3 {
		t.Errorf("skeleton manifest: %+v", m)
	}
	roles := map[string]bool{}
	consumes := 0
	for _, p := range m.Processes {
		roles[p.Role] = true
		consumes += len(p.Consumes)
	}
	if !roles["api"] || !roles["relay"] || !roles["consumer"] || consumes == 0 {
		t.Errorf("skeleton lacks the roles or consumes of CONTRACTS.md: roles %v, consumes %d", roles, consumes)
	}
	if m.Saga == nil || m.Saga.Choreographed() {
		t.Fatalf("skeleton saga %+v: want an orchestrated saga", m.Saga)
	}
	kinds := map[models.StepKind]bool{}
	for _, st := range m.Saga.Steps {
		kinds[st.Kind] = true
		if st.Kind == models.Pivot {
			p, _ := m.Provider(st.Effect.Provider)
			if p.Kind != models.ProviderPayments || st.Compensation == nil || st.Compensation.Effect == nil {
				t.Errorf("the pivot %s is not a charge at a payments provider with its refund", st.Name)
			}
		}
	}
	if !kinds[models.Compensatable] || !kinds[models.Pivot] || !kinds[models.Retriable] {
		t.Errorf("skeleton step kinds %v: want all three", kinds)
	}
	if w := m.Workload; w == nil || w.Read == nil || w.List == nil {
		t.Errorf("skeleton workload %+v: want start, read and list", w)
	}
	res := map[string]bool{}
	for _, r := range m.Resources {
		res[r.Kind] = r.HeldBy != nil
	}
	if !res[""] || !res[models.ProviderPayments] {
		t.Errorf("skeleton resources %+v: want a counted and a payments one, each held by the sagas", m.Resources)
	}
	if n := strings.Count(string(b), "// "); n < 20 {
		t.Errorf("only %d comment lines", n)
	}
}

// TestSkeletonMatchesTheSchema: with its comments stripped, the skeleton is
// valid against docs/manifest.schema.json (what an editor checks it by).
func TestSkeletonMatchesTheSchema(t *testing.T) {
	s := compileSchema(t, "")
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(stripComments(Skeleton("myservice"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("the skeleton does not match the schema: %v", err)
	}
}

// TestSkeletonBodyUsesEveryNode: the workload's body template shows every
// kind of generator node.
func TestSkeletonBodyUsesEveryNode(t *testing.T) {
	m, err := ParseManifest(Skeleton("x"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := models.ParseTemplate(m.Workload.Start.Body)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	formatted := false
	tmpl.Walk(func(n *models.TNode) {
		seen[n.Kind] = true
		formatted = formatted || (n.Kind == models.TInt && n.Seq != "")
	})
	for _, k := range []string{models.TChoices, models.TInt, models.TSeq, models.TOutcome, models.TResource, models.TArray, models.TSum, models.TLiteral} {
		if !seen[k] {
			t.Errorf("the body template has no %s node", k)
		}
	}
	if !formatted {
		t.Errorf("the body template has no int node with a format")
	}
	if !strings.Contains(string(m.Workload.Start.Body), `{"literal":{"seq":`) {
		t.Errorf("the literal node does not show what it is for (an object that would read as a node)")
	}
}

// TestSkeletonAlternativesLoad: the alternative shapes its comments
// describe load when made as they say: outbox-only (no saga, no held_by,
// no money), choreographed (no orchestrator), status from events, seq
// from the outbox.
func TestSkeletonAlternativesLoad(t *testing.T) {
	edit := func(name string, change func(m map[string]any)) {
		var m map[string]any
		if err := json.Unmarshal(stripComments(Skeleton("x")), &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		b, _ := json.Marshal(m)
		got, err := ParseManifest(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		switch name {
		case "outbox-only":
			if got.Saga != nil {
				t.Errorf("%s: a saga", name)
			}
		case "choreographed":
			if !got.Saga.Choreographed() {
				t.Errorf("%s: not choreographed", name)
			}
		}
	}
	saga := func(m map[string]any) map[string]any { return m["saga"].(map[string]any) }
	edit("outbox-only", func(m map[string]any) {
		delete(m, "saga")
		res := m["resources"].([]any)
		delete(res[0].(map[string]any), "held_by")
		m["resources"] = res[:1]
	})
	edit("choreographed", func(m map[string]any) { delete(saga(m), "orchestrator") })
	edit("status from events", func(m map[string]any) {
		saga(m)["status_from"] = "events"
		delete(m["workload"].(map[string]any), "list")
		delete(m["workload"].(map[string]any), "read")
	})
	edit("seq from the outbox", func(m map[string]any) { m["seq"] = "outbox" })
}

// TestSkeletonCommentsEveryField: the first time a field appears (by its
// path, array indices left out) it has a comment of one or two lines
// saying what to write there; a note between fields is at most three.
func TestSkeletonCommentsEveryField(t *testing.T) {
	seen := map[string]bool{}
	var walk func(n node, path string)
	walk = func(n node, path string) {
		for _, it := range n.items {
			walk(it, path)
		}
		for _, fl := range n.fields {
			lines := 0
			if fl.comment != "" {
				lines = len(strings.Split(fl.comment, "\n"))
			}
			if fl.key == "" {
				if lines == 0 || lines > 3 {
					t.Errorf("%s: a note of %d lines", path, lines)
				}
				continue
			}
			p := path + "." + fl.key
			if !seen[p] && (lines == 0 || lines > 2) {
				t.Errorf("%s: first appears with a comment of %d lines, want 1 or 2", p, lines)
			}
			seen[p] = true
			walk(fl.val, p)
		}
	}
	walk(skeleton("x"), "manifest")
	for _, line := range strings.Split(string(Skeleton("myservice")), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//") && len([]rune(line)) > 120 {
			t.Errorf("comment line of %d characters: %s", len([]rune(line)), line)
		}
	}
}

// TestSkeletonCoversManifest fails when Manifest gains a JSON field the
// skeleton does not show: add it to skeleton() in skeleton.go.
func TestSkeletonCoversManifest(t *testing.T) {
	b := string(Skeleton("x"))
	var walk func(reflect.Type, string)
	seen := map[reflect.Type]bool{}
	walk = func(typ reflect.Type, where string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			fl := typ.Field(i)
			name, _, _ := strings.Cut(fl.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(b, `"`+name+`"`) { // a key, or named in the comment of an empty list
				t.Errorf("the skeleton has no %s.%s: add it to skeleton() in targets/skeleton.go", where, name)
			}
			walk(fl.Type, where+"."+name)
		}
	}
	walk(reflect.TypeOf(Manifest{}), "manifest")
}

func TestCommentLinesOnly(t *testing.T) {
	src := "{\n  // a comment\n  \"name\": \"a//b\", // not a whole-line comment\n}"
	got := string(stripComments([]byte(src)))
	if strings.Contains(got, "a comment") || !strings.Contains(got, `"a//b", // not`) {
		t.Errorf("stripComments: %q", got)
	}
}
