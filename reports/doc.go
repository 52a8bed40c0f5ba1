// Package reports renders a verdict and its history for people and for CI:
// a self-contained report.html, junit.xml, the verdict.json schema, a merged
// index over many runs, and the terminal summary. It never changes a verdict.
package reports
