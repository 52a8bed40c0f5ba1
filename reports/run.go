package reports

import (
	"path/filepath"
)

// File names inside a run directory (DESIGN §3). harness/runstore owns the
// layout and writes every artifact (atomically); these name what reports
// read.
const (
	HistoryFile = "history.jsonl"
	VerdictFile = "verdict.json"
	ReportFile  = "report.html"
	JUnitFile   = "junit.xml"
	IndexFile   = "index.html"
)

// ReadRunSummary reads a run directory's verdict.json for WriteIndex.
func ReadRunSummary(dir string) (RunSummary, error) {
	v, err := ReadVerdict(filepath.Join(dir, VerdictFile))
	if err != nil {
		return RunSummary{}, err
	}
	return RunSummary{Dir: dir, Verdict: v}, nil
}
