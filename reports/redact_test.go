package reports

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"postgres url", "dial postgres://app:s3cret@127.0.0.1:5432/orders failed", "dial postgres://app:***@127.0.0.1:5432/orders failed"},
		{"url without password", "postgres://app@127.0.0.1/orders", "postgres://app@127.0.0.1/orders"},
		{"http url", `GET https://u:p4ss@api.example.com/x`, `GET https://u:***@api.example.com/x`},
		{"libpq dsn", "host=x user=app password=hunter2 dbname=orders", "host=x user=app password=*** dbname=orders"},
		{"quoted libpq", "user=app password='a b' dbname=o", "user=app password=*** dbname=o"},
		{"bearer", "Authorization: Bearer eyJhbGciOi.J9.xyz", "Authorization: Bearer ***"},
		{"basic", "authorization: Basic dXNlcjpwYXNz", "authorization: Basic ***"},
		{"json token", `{"token":"abc\"def","amount":5}`, `{"token":"***","amount":5}`},
		{"json api key", `{"api_key": "k-123"}`, `{"api_key": "***"}`},
		{"query param", "/charge?api_key=sk_live_42&amount=5", "/charge?api_key=***&amount=5"},
		{"header api key", "X-Api-Key: 1234", "X-Api-Key: ***"},
		{"idempotency key kept", `{"idempotency_key":"k-1"}`, `{"idempotency_key":"k-1"}`},
		{"plain text kept", "order o-17 charged 2500", "order o-17 charged 2500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactIdempotent(t *testing.T) {
	in := "postgres://u:pw@h/db password=x Bearer abcdef token=zz"
	once := Redact(in)
	if twice := Redact(once); twice != once {
		t.Fatalf("Redact is not idempotent: %q then %q", once, twice)
	}
	for _, secret := range []string{"pw@", "=x ", "abcdef", "zz"} {
		if strings.Contains(once, secret) {
			t.Errorf("%q still contains %q", once, secret)
		}
	}
}
