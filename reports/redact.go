package reports

import (
	"regexp"
	"strings"
)

// The redaction rules. Reports are shared (CI artifacts, chat, tickets), and
// a history carries whatever the target logged or published, so every string
// taken from a history passes through Redact before it is rendered.
//
// Each rule has triggers: lower-case substrings without which it cannot
// match. Checking them first keeps Redact cheap on the common string that
// holds no credential (a 100k-op report calls it hundreds of thousands of
// times; the regexps alone took seconds).
var redactRules = []struct {
	triggers []string
	re       *regexp.Regexp
	repl     string
}{
	// URL userinfo: postgres://user:pass@host → postgres://user:***@host.
	{[]string{"://"}, regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s"']*:)[^@\s/"']*@`), "${1}***@"},
	// Authorization header values and bare bearer/basic credentials.
	{[]string{"bearer", "basic"}, regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}`), "${1}${2}***"},
	// JSON members whose name says secret: "password":"x", "api_key": "x".
	{secretWords, regexp.MustCompile(`(?i)("(?:password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_\-]?key|x-api-key|authorization)"\s*:\s*")(?:[^"\\]|\\.)*"`), "${1}***\""},
	// key=value and key: value forms (libpq DSNs, query strings, headers, env).
	{secretWords, regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_\-]?key|x-api-key|sslpassword)(\s*[=:]\s*)('[^']*'|[^\s"'&,;]+)`), "${1}${2}***"},
}

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
		hit := false
		for _, t := range r.triggers {
			if strings.Contains(low, t) {
				hit = true
				break
			}
		}
		if hit {
			s = r.re.ReplaceAllString(s, r.repl)
			low = asciiLower(s)
		}
	}
	return s
}

// secretWords trigger the key=value and JSON-member rules; every name those
// rules match contains one of them.
var secretWords = []string{"pass", "pwd", "secret", "token", "api_key", "api-key", "apikey", "authorization"}

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
