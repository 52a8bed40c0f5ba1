package reports

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadRunSummary(t *testing.T) {
	_, v := failingRun()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, VerdictFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(f, v); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rs, err := ReadRunSummary(dir)
	if err != nil || rs.Verdict.Run.Seed != 42 {
		t.Errorf("ReadRunSummary = %+v, %v", rs, err)
	}
	if _, err := ReadRunSummary(t.TempDir()); err == nil {
		t.Error("ReadRunSummary of a directory without verdict.json succeeded")
	}
}
