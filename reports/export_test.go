package reports

import (
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// Clause is a narrative clause, for the external tests.
type Clause = clause

// Narratives returns the story of every violation of v, in verdict order,
// as the report tells it (runDir: where the logs and failpoints.jsonl are).
func Narratives(h *models.History, v models.Verdict, runDir string) (vs []models.Violation, stories [][]Clause) {
	comp := buildComponents(h, runDir)
	if ts, err := time.Parse(time.RFC3339Nano, h.Header.Started); err == nil {
		comp.attachLogs(runDir, ts)
	}
	n := newNarrator(h, comp, faultWindows(h), v)
	for _, r := range v.Results {
		for _, vi := range r.Violations {
			if vi.Checker == "" {
				vi.Checker = r.Checker
			}
			vs = append(vs, vi)
			stories = append(stories, n.narrate(vi))
		}
	}
	return vs, stories
}

// RelayCrashRun exposes the component-op fixture.
func RelayCrashRun() (*models.History, models.Verdict, map[string]string) { return relayCrashRun() }
