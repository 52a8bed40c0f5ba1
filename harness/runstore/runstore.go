// Package runstore owns the run directory (DESIGN §3): its layout, its
// scenario.json, the history file the recorder appends to, and the one
// writer of its artifacts. Every file the harness writes into a run
// directory after the run goes through WriteFile: a temp file in the same
// directory and a rename, so a reader (or a crash) never sees half a
// verdict or half a report.
package runstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
	"github.com/sagachaos/sagachaos/scenarios"
)

// File names inside a run directory.
const (
	HistoryFile  = "history.jsonl"
	ScenarioFile = "scenario.json"
	VerdictFile  = "verdict.json"
	ReportFile   = "report.html"
	JUnitFile    = "junit.xml"
	// FailpointLog is the file every component appends its failpoint lines
	// to (SAGACHAOS_FAILPOINT_LOG).
	FailpointLog = "failpoints.jsonl"
)

// Scenario is the content of scenario.json: everything needed to re-run a
// run.
type Scenario struct {
	Target     string             `json:"target"`
	TargetPath string             `json:"target_path,omitempty"`
	Mutant     string             `json:"mutant,omitempty"`
	Scenario   scenarios.Scenario `json:"scenario"`
}

// DirName is the default name of a run directory:
// <time>-<scenario>-<seed>.
func DirName(sc scenarios.Scenario, now time.Time) string {
	return fmt.Sprintf("%s-%s-%d", now.UTC().Format("20060102T150405"), sc.Name, sc.Seed)
}

// Dir is an open run directory: its absolute path and the history file
// the run appends to.
type Dir struct {
	// Path is absolute: components run with the run directory as their
	// working directory and get paths into it through env, and only an
	// absolute path means the same thing to both.
	Path    string
	history *os.File
}

// Create makes the run directory, writes its scenario.json and opens its
// history for appending.
func Create(path string, sc Scenario) (*Dir, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create run dir: %w", err)
	}
	d := &Dir{Path: path}
	if err := WriteJSON(d.File(ScenarioFile), sc); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.File(HistoryFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	d.history = f
	return d, nil
}

// File is the path of name inside the run directory.
func (d *Dir) File(name string) string { return filepath.Join(d.Path, name) }

// History is the history file, for a models.Recorder. Each op is one
// write(2), so a harness that dies leaves every op recorded before.
func (d *Dir) History() io.Writer { return d.history }

// Close closes the history file.
func (d *Dir) Close() error { return d.history.Close() }

// ReadScenario reads a run directory's scenario.json. A fault whose kind is
// unknown or whose parameters are bad is an error naming the file, the
// fault and the field.
func ReadScenario(runDir string) (Scenario, error) {
	var sc Scenario
	path := filepath.Join(runDir, ScenarioFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, fmt.Errorf("read run dir: %w", err)
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		return sc, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// WriteFile writes b to path through a temp file in the same directory and
// a rename.
func WriteFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// WriteJSON writes v as indented JSON with WriteFile.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal %s: %w", filepath.Base(path), err)
	}
	return WriteFile(path, append(b, '\n'))
}

// WriteVerdict writes verdict.json alone: a run that ended without a
// verdict of the checkers (an error, an interrupt), or `sagachaos check`.
func WriteVerdict(dir string, v models.Verdict) error {
	return render(filepath.Join(dir, VerdictFile), func(w io.Writer) error { return reports.WriteJSON(w, v) })
}

// WriteArtifacts writes verdict.json, junit.xml and report.html of a run
// directory from its history and verdict.
func WriteArtifacts(dir string, h *models.History, v models.Verdict) error {
	if err := WriteVerdict(dir, v); err != nil {
		return err
	}
	if err := render(filepath.Join(dir, JUnitFile), func(w io.Writer) error { return reports.WriteJUnit(w, v) }); err != nil {
		return err
	}
	return render(filepath.Join(dir, ReportFile), func(w io.Writer) error {
		return reports.WriteHTML(w, h, v, reports.HTMLOptions{RunDir: dir})
	})
}

func render(path string, fn func(io.Writer) error) error {
	var b bytes.Buffer
	if err := fn(&b); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return WriteFile(path, b.Bytes())
}
