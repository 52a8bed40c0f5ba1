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
// signature (checker + kind), a strip of verdicts per campaign (seed on
// x, verdict as colour) and each signature's seeds; ReadSummaryFile reads
// a sweep's summary.jsonl (models.RunRecord) so runs whose directory was
// not kept still count.
//
// What report.html shows of a violation, and where it comes from:
//
//   - the target's own lanes (components.go): each instance's starts,
//     health, exits, failpoints reached and fired, and its down and paused
//     windows, from the component/<instance> ops, or, for histories that
//     predate them, the nemesis's crash/restart ops and failpoints.jsonl;
//     each mark links the log lines around it (logs.go: the supervisor's
//     start marker per incarnation, the line naming the failpoint, the
//     last line before an exit, or the line at the mark's time);
//   - labels laid out in rows (layout.go and the script): shortened before
//     the next mark or left out with their text in the tooltip, and a last
//     pass in the page hides any label that would still intersect another;
//   - one generated line of what happened (narrative.go): only facts that
//     ops of the history hold, each clause citing them.
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
