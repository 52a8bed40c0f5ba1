package reports

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

// TestWriteJUnitRuns: one junit.xml for a sweep has one testsuite per run
// and the totals of all of them on <testsuites>.
func TestWriteJUnitRuns(t *testing.T) {
	_, failing := failingRun()
	valid := models.Verdict{Status: models.Valid, Run: models.RunInfo{Target: "t", Scenario: "s", Seed: 2},
		Results: []models.CheckResult{{Checker: "a", Status: models.Valid}, {Checker: "b", Status: models.Valid}}}
	broken := models.Verdict{Error: "env up: initdb failed", Run: models.RunInfo{Target: "t", Scenario: "s", Seed: 3}}
	var buf bytes.Buffer
	if err := WriteJUnitRuns(&buf, []models.Verdict{failing, valid, broken}); err != nil {
		t.Fatal(err)
	}
	var doc junitDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("junit does not parse: %v\n%s", err, buf.String())
	}
	if len(doc.Suites) != 3 {
		t.Fatalf("%d testsuites, want 3", len(doc.Suites))
	}
	var tests, f, e, s int
	for _, su := range doc.Suites {
		tests += su.Tests
		f += su.Failures
		e += su.Errors
		s += su.Skipped
		if su.Tests != len(su.Cases) {
			t.Errorf("suite %s: tests=%d but %d testcases", su.Name, su.Tests, len(su.Cases))
		}
	}
	if doc.Tests != tests || doc.Failures != f || doc.Errors != e || doc.Skipped != s {
		t.Errorf("totals %d/%d/%d/%d, suites add up to %d/%d/%d/%d", doc.Tests, doc.Failures, doc.Errors, doc.Skipped, tests, f, e, s)
	}
	if f != 1 || e != 1 {
		t.Errorf("failures %d errors %d, want 1 and 1", f, e)
	}
}
