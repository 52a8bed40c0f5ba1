package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/models"
)

func TestRenderRun(t *testing.T) {
	h, v := failingRun()
	dir := t.TempDir()
	write := func(name string, fn func(f *os.File) error) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := fn(f); err != nil {
			t.Fatal(err)
		}
	}
	write(HistoryFile, func(f *os.File) error { return models.WriteHistory(f, h) })
	write(VerdictFile, func(f *os.File) error { return WriteJSON(f, v) })
	write("relay-1.log", func(f *os.File) error { _, err := f.WriteString("x\n"); return err })
	if err := RenderRun(dir, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `href="./relay-1.log"`) || !strings.Contains(string(page), "o-17") {
		t.Error("rendered report lacks the log link or the failing order")
	}
	if _, err := os.Stat(filepath.Join(dir, JUnitFile)); err != nil {
		t.Error(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
	rs, err := ReadRunSummary(dir)
	if err != nil || rs.Verdict.Run.Seed != 42 {
		t.Errorf("ReadRunSummary = %+v, %v", rs, err)
	}
	if err := RenderRun(t.TempDir(), HTMLOptions{}); err == nil {
		t.Error("RenderRun of a directory without verdict.json succeeded")
	}
}
