package reports

import (
	"regexp"
	"strings"
)

// The redaction rules. Reports are shared (CI artifacts, chat, tickets), and
// a history carries whatever the target logged or published, so every string
// taken from a history passes through Redact before it is rendered.
//
// Each rule has a trigger: a test for lower-case substrings without which it
// cannot match. Checking it first keeps Redact cheap on the common string that
// holds no credential (a 100k-op report calls it hundreds of thousands of
// times; the regexps alone took seconds).
var redactRules = []struct {
	trigger trigger
	re      *regexp.Regexp
	repl    string
}{
	// URL userinfo: postgres://user:pass@host → postgres://user:***@host.
	// The password runs to the last '@' of the authority, as url.Parse
	// (and so pgx) reads it: "p@ss" in postgres://u:p@ss@db is a password.
	{trigURL, regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s"']*:)[^\s/"'?#]*@`), "${1}***@"},
	// Authorization headers: the credential after an optional scheme
	// (Bearer, Basic, token, …), whatever the scheme.
	{trigAuthz, regexp.MustCompile(`(?i)\b((?:proxy-)?authorization)(\s*[=:]\s*)((?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)?[^\s"'&,;\\]+`), "${1}${2}${3}***"},
	// Bare bearer/basic credentials.
	{trigBearer, regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}`), "${1}${2}***"},
	// JSON inside a JSON string, one level of escaping deep (a logged
	// request body): \"db_password\":\"x\" → \"db_password\":\"***\". The value
	// runs to the first escaped quote that is not itself escaped.
	{trigSecret, regexp.MustCompile(`(?i)(\\"` + secretKey + `\\"\s*:\s*\\")(?:[^"\\]|\\[^"\\]|\\\\(?:[^"\\]|\\[^"\\]|\\\\|\\"))*\\"`), "${1}***\\\""},
	// JSON members whose name contains a secret word: "password":"x",
	// "DB_PASSWORD": "x", "githubToken":"x".
	{trigSecret, regexp.MustCompile(`(?i)("` + secretKey + `"\s*:\s*")(?:[^"\\]|\\.)*"`), "${1}***\""},
	// key=value and key: value forms whose key contains a secret word (env
	// files and shell lines — DB_PASSWORD=, PGPASSWORD=, AWS_SECRET_ACCESS_KEY=
	// — libpq DSNs, query strings, headers, YAML). The key starts at a word
	// boundary or after '_': DB_PASSWORD has no boundary before PASSWORD.
	{trigSecret, regexp.MustCompile(`(?i)\b(` + secretName + `)(\s*[=:]\s*)('[^']*'|"(?:[^"\\]|\\.)*"|(?:[^\s"'&,;\\]|\\[^"])+)`), "${1}${2}***"},
}

// secretName is a key (an identifier: letters, digits, '_', '-', '.') that
// contains a secret word anywhere; secretKey also takes an Authorization
// member of a JSON object (unquoted, the header rule above handles it).
const (
	secretWord = `password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credentials?`
	secretName = `[a-z0-9_.\-]*?(?:` + secretWord + `)[a-z0-9_.\-]*`
	secretKey  = `[a-z0-9_.\-]*?(?:` + secretWord + `|authorization)[a-z0-9_.\-]*`
)

// Redact removes credentials from s: DSN and URL passwords
// (postgres://u:pass@ → postgres://u:***@, password=… in key=value DSNs),
// Authorization / Bearer / Basic credentials, and tokens, secrets and API keys
// in key=value, header and JSON forms. It is applied to every string a report
// takes from a history, a verdict or a run directory.
func Redact(s string) string {
	if s == "" {
		return s
	}
	low := asciiLower(s)
	for _, r := range redactRules {
		if !r.trigger.in(low) {
			continue
		}
		s = r.re.ReplaceAllString(s, r.repl)
		low = asciiLower(s)
	}
	return s
}

// hasSecretWord reports whether low holds a word the key=value and
// JSON-member rules need (every name they match contains one): one pass
// over the string instead of one search per word.
func hasSecretWord(low string) bool {
	for i := 0; i < len(low); i++ {
		rest := low[i:]
		switch low[i] {
		case 'p':
			if strings.HasPrefix(rest, "passw") || strings.HasPrefix(rest, "passphrase") || strings.HasPrefix(rest, "pwd") ||
				strings.HasPrefix(rest, "private") {
				return true
			}
		case 's':
			if strings.HasPrefix(rest, "secret") {
				return true
			}
		case 't':
			if strings.HasPrefix(rest, "token") {
				return true
			}
		case 'a':
			if strings.HasPrefix(rest, "api") || strings.HasPrefix(rest, "access") || strings.HasPrefix(rest, "authorization") {
				return true
			}
		case 'c':
			if strings.HasPrefix(rest, "credential") {
				return true
			}
		}
	}
	return false
}

// trigger names what a rule needs in the lower-cased string. (A switch, not
// a func value: a string passed to an unknown func escapes to the heap.)
type trigger int

const (
	trigURL trigger = iota
	trigAuthz
	trigBearer
	trigSecret
)

func (t trigger) in(low string) bool {
	switch t {
	case trigURL:
		return strings.Contains(low, "://")
	case trigAuthz:
		return strings.Contains(low, "authorization")
	case trigBearer:
		return strings.Contains(low, "bearer") || strings.Contains(low, "basic")
	default:
		return hasSecretWord(low)
	}
}

// asciiLower lower-cases ASCII letters, returning s itself when it has no
// upper-case letter (the common case: no allocation).
func asciiLower(s string) string {
	i := 0
	for i < len(s) && !('A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}
