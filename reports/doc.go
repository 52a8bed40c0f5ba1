// Package reports renders a verdict and its history for people and for CI:
// a self-contained report.html, junit.xml, the verdict.json schema, a merged
// index over many runs, and the terminal summary. It never changes a verdict.
//
// One run directory gets:
//
//	WriteJSON    → verdict.json (schema: docs/verdict.md; ReadVerdict reads it back)
//	WriteJUnit   → junit.xml    (one testsuite per run, one testcase per checker)
//	WriteHTML    → report.html  (one file, no network; logs linked by relative name)
//	WriteTerminal→ stdout       (verdict, one line per checker, report path, repro)
//
// and many runs get WriteIndex → index.html, with violations grouped by
// signature (checker + kind).
//
// Everything a report shows that came from the target — order ids, event
// payloads, error text, log file names — passes through Redact (DSN
// passwords, bearer tokens, API keys) and then html/template's contextual
// escaping; the per-order data that report.html draws lazily in the browser
// is embedded as JSON with <, > and & escaped and is only ever put into the
// page with textContent. A headless Chromium test checks both: the report of
// a failing run opens without console errors, and hostile payloads do not
// execute.
package reports
