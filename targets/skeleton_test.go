package targets

import (
	"reflect"
	"strings"
	"testing"
)

// TestSkeletonLoads: the skeleton `sagachaos init` writes parses and
// validates as it is, comments included.
func TestSkeletonLoads(t *testing.T) {
	b := Skeleton("myservice")
	m, err := ParseManifest(b)
	if err != nil {
		t.Fatalf("skeleton does not load: %v\n%s", err, b)
	}
	if m.Name != "myservice" || m.API.Process != "api" || len(m.Processes) != 3 {
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
	if n := strings.Count(string(b), "// "); n < 20 {
		t.Errorf("only %d comment lines", n)
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
