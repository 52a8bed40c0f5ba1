package reports

import (
	"strings"
	"testing"
)

// redactTable is every spelling of a credential the reports must hide,
// grouped by where it turns up: env files and shell lines, JSON (plain and
// escaped inside another JSON string, as a logged request body is), URL
// userinfo, HTTP headers, query strings and libpq DSNs. Each case names the
// secret that must vanish; want, when set, is the exact output.
var redactTable = []struct {
	name, in, secret, want string
}{
	// env style: the key is an identifier that contains a secret word
	// anywhere, after an underscore too.
	{"env DB_PASSWORD", "DB_PASSWORD=hunter2", "hunter2", "DB_PASSWORD=***"},
	{"env PGPASSWORD", "PGPASSWORD=hunter2 psql -h db", "hunter2", "PGPASSWORD=*** psql -h db"},
	{"env POSTGRES_PASSWORD", "POSTGRES_PASSWORD=hunter2", "hunter2", "POSTGRES_PASSWORD=***"},
	{"env AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "wJalr", "AWS_SECRET_ACCESS_KEY=***"},
	{"env GITHUB_TOKEN", "GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_", "GITHUB_TOKEN=***"},
	{"env export quoted", `export DB_PASSWORD="hunter 2"`, "hunter", `export DB_PASSWORD=***`},
	{"env single quoted", `MYSQL_ROOT_PASSWORD='hunter 2'`, "hunter", `MYSQL_ROOT_PASSWORD=***`},
	{"env in a process list", "env PATH=/bin SAGACHAOS_POSTGRES_DSN=postgres://u:hunter2@db/x API_KEY=k-42 HOME=/root", "hunter2", "env PATH=/bin SAGACHAOS_POSTGRES_DSN=postgres://u:***@db/x API_KEY=*** HOME=/root"},
	{"env api key", "STRIPE_API_KEY=sk_live_42", "sk_live_42", "STRIPE_API_KEY=***"},
	{"env client secret", "OAUTH_CLIENT_SECRET=s3cr3t", "s3cr3t", "OAUTH_CLIENT_SECRET=***"},
	{"yaml", "password: hunter2", "hunter2", "password: ***"},

	// JSON members whose name contains a secret word.
	{"json password", `{"password":"hunter2","user":"app"}`, "hunter2", `{"password":"***","user":"app"}`},
	{"json db_password", `{"db_password": "hunter2"}`, "hunter2", `{"db_password": "***"}`},
	{"json camelCase", `{"githubToken":"ghp_abc123"}`, "ghp_abc123", `{"githubToken":"***"}`},
	{"json env name", `{"POSTGRES_PASSWORD":"hunter2"}`, "hunter2", `{"POSTGRES_PASSWORD":"***"}`},
	{"json escaped quote in value", `{"token":"abc\"def","amount":5}`, "def", `{"token":"***","amount":5}`},
	{"json api key", `{"api_key": "k-123"}`, "k-123", `{"api_key": "***"}`},
	{"json authorization", `{"Authorization":"Bearer eyJhbGciOi.J9.xyz"}`, "eyJ", `{"Authorization":"***"}`},

	// JSON inside a JSON string (a logged request body, a payload).
	{"escaped json password", `{"body":"{\"password\":\"hunter2\",\"amount\":5}"}`, "hunter2", `{"body":"{\"password\":\"***\",\"amount\":5}"}`},
	{"escaped json with spaces", `"{\"db_password\": \"hunter2\"}"`, "hunter2", `"{\"db_password\": \"***\"}"`},
	{"escaped json quote in value", `"{\"secret\":\"a\\\"hunter2\"}"`, "hunter2", `"{\"secret\":\"***\"}"`},
	{"escaped json backslash in value", `"{\"token\":\"a\\\\\",\"n\":1}"`, "a\\\\", `"{\"token\":\"***\",\"n\":1}"`},

	// URL userinfo.
	{"postgres url", "dial postgres://app:s3cret@127.0.0.1:5432/orders failed", "s3cret", "dial postgres://app:***@127.0.0.1:5432/orders failed"},
	{"url without password", "postgres://app@127.0.0.1/orders", "", "postgres://app@127.0.0.1/orders"},
	{"http url", `GET https://u:p4ss@api.example.com/x`, "p4ss", `GET https://u:***@api.example.com/x`},
	{"url password with @", "postgres://app:p@ss@db:5432/x", "ss@", "postgres://app:***@db:5432/x"},
	{"url password with backslash", `postgres://app:hun\ter2@db/x`, "ter2", "postgres://app:***@db/x"},
	{"amqp url", "amqp://guest:guestpw@rabbit:5672/", "guestpw", "amqp://guest:***@rabbit:5672/"},
	{"url in json", `{"dsn":"postgres://u:hunter2@db/x"}`, "hunter2", `{"dsn":"postgres://u:***@db/x"}`},

	// Authorization headers.
	{"bearer", "Authorization: Bearer eyJhbGciOi.J9.xyz", "eyJ", "Authorization: Bearer ***"},
	{"basic", "authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "authorization: Basic ***"},
	{"token scheme", "Authorization: token ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_", "Authorization: token ***"},
	{"bare credential", "Authorization: s3cr3tvalue", "s3cr3tvalue", "Authorization: ***"},
	{"proxy authorization", "Proxy-Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Proxy-Authorization: Basic ***"},
	{"bare bearer", "sent Bearer abc.def.ghi to the gateway", "abc.def", "sent Bearer *** to the gateway"},
	{"header api key", "X-Api-Key: 1234", "1234", "X-Api-Key: ***"},
	{"header auth token", "X-Auth-Token: tok-99", "tok-99", "X-Auth-Token: ***"},

	// Query strings.
	{"query password", "GET /login?user=app&password=hunter2&next=/", "hunter2", "GET /login?user=app&password=***&next=/"},
	{"query first param", "/charge?api_key=sk_live_42&amount=5", "sk_live_42", "/charge?api_key=***&amount=5"},
	{"query access_token", "https://api.example.com/v1?access_token=ya29.a0AfH6&x=1", "ya29", "https://api.example.com/v1?access_token=***&x=1"},
	{"query sslpassword", "postgres://u@db/x?sslmode=require&sslpassword=hunter2", "hunter2", "postgres://u@db/x?sslmode=require&sslpassword=***"},

	// libpq key=value DSNs.
	{"libpq dsn", "host=x user=app password=hunter2 dbname=orders", "hunter2", "host=x user=app password=*** dbname=orders"},
	{"libpq backslash", `host=x password=hun\\ter2 dbname=o`, "ter2", `host=x password=*** dbname=o`},
	{"quoted libpq", "user=app password='a b' dbname=o", "a b", "user=app password=*** dbname=o"},

	// What must survive.
	{"idempotency key kept", `{"idempotency_key":"k-1"}`, "", `{"idempotency_key":"k-1"}`},
	{"Idempotency-Key header kept", "Idempotency-Key: k-1", "", "Idempotency-Key: k-1"},
	{"plain text kept", "order o-17 charged 2500", "", "order o-17 charged 2500"},
	{"passed kept", "passed=3 failed=0", "", "passed=3 failed=0"},
	{"key kept", `{"key":"o-17","seq":3}`, "", `{"key":"o-17","seq":3}`},
}

func TestRedact(t *testing.T) {
	for _, tt := range redactTable {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			if tt.secret != "" && strings.Contains(got, tt.secret) {
				t.Errorf("Redact(%q) = %q still holds %q", tt.in, got, tt.secret)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := Redact(got); again != got {
				t.Errorf("not idempotent: %q then %q", got, again)
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
