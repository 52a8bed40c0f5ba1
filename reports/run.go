package reports

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sagachaos/sagachaos/models"
)

// File names inside a run directory (DESIGN §3).
const (
	HistoryFile = "history.jsonl"
	VerdictFile = "verdict.json"
	ReportFile  = "report.html"
	JUnitFile   = "junit.xml"
	IndexFile   = "index.html"
)

// RenderRun (re)renders report.html and junit.xml of a saved run directory
// from its history.jsonl and verdict.json: what `sagachaos report RUN_DIR`
// does for one run. opts.RunDir defaults to dir. A history that cannot be
// read fully still renders (what was read is shown and the page says the
// history was cut); a missing verdict is an error.
func RenderRun(dir string, opts HTMLOptions) error {
	v, err := ReadVerdict(filepath.Join(dir, VerdictFile))
	if err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	h, herr := models.ReadHistoryFile(filepath.Join(dir, HistoryFile))
	if herr != nil && h == nil {
		h = &models.History{}
	}
	if herr != nil {
		h.Truncated = true
	}
	if opts.RunDir == "" {
		opts.RunDir = dir
	}
	var page, junit bytes.Buffer
	if err := WriteHTML(&page, h, v, opts); err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	if err := WriteJUnit(&junit, v); err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, ReportFile), page.Bytes()); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, JUnitFile), junit.Bytes()); err != nil {
		return err
	}
	if herr != nil {
		return fmt.Errorf("render %s: rendered what could be read, but: %w", dir, herr)
	}
	return nil
}

// ReadRunSummary reads a run directory's verdict.json for WriteIndex.
func ReadRunSummary(dir string) (RunSummary, error) {
	v, err := ReadVerdict(filepath.Join(dir, VerdictFile))
	if err != nil {
		return RunSummary{}, err
	}
	return RunSummary{Dir: dir, Verdict: v}, nil
}

// writeFileAtomic writes through a temp file and a rename, so a reader (or
// a crash) never sees half a report.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
