package reports

import "regexp"

// The redaction rules. Reports are shared (CI artifacts, chat, tickets), and
// a history carries whatever the target logged or published, so every string
// taken from a history passes through Redact before it is rendered.
var redactRules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// URL userinfo: postgres://user:pass@host → postgres://user:***@host.
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s"']*:)[^@\s/"']*@`), "${1}***@"},
	// Authorization header values and bare bearer/basic credentials.
	{regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}`), "${1}${2}***"},
	// JSON members whose name says secret: "password":"x", "api_key": "x".
	{regexp.MustCompile(`(?i)("(?:password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_\-]?key|x-api-key|authorization)"\s*:\s*")(?:[^"\\]|\\.)*"`), "${1}***\""},
	// key=value and key: value forms (libpq DSNs, query strings, headers, env).
	{regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_\-]?key|x-api-key|sslpassword)(\s*[=:]\s*)('[^']*'|[^\s"'&,;]+)`), "${1}${2}***"},
}

// Redact removes credentials from s: DSN and URL passwords
// (postgres://u:pass@ → postgres://u:***@, password=… in key=value DSNs),
// Authorization / Bearer / Basic credentials, and tokens, secrets and API keys
// in key=value, header and JSON forms. It is applied to every string a report
// takes from a history, a verdict or a run directory.
func Redact(s string) string {
	for _, r := range redactRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}
