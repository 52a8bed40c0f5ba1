package relay

import (
	"strings"
	"testing"
)

func TestParseDatabases(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]string
		err  string
	}{
		{in: "orders=postgres://a/orders  inventory=postgres://a/inv?x=1", want: map[string]string{"orders": "postgres://a/orders", "inventory": "postgres://a/inv?x=1"}},
		{in: "", err: "empty"},
		{in: "orders", err: "want name=URL"},
		{in: "=postgres://a", err: "want name=URL"},
	}
	for _, c := range cases {
		got, err := ParseDatabases(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDatabases(%q) = %v, want error %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("ParseDatabases(%q) = %v, %v", c.in, got, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("ParseDatabases(%q)[%s] = %q, want %q", c.in, k, got[k], v)
			}
		}
	}
}
