package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/sagachaos/sagachaos/models"
)

// WriteJSON writes v as verdict.json: indented two spaces, fields in struct
// order, a trailing newline, and the schema version filled in, so two runs
// with the same verdict produce byte-identical files (diffable in CI). The
// schema is documented in docs/verdict.md. A nil slice of results is
// written as [] rather than null so that readers need no special case.
func WriteJSON(w io.Writer, v models.Verdict) error {
	if v.Version == 0 {
		v.Version = models.VerdictVersion
	}
	if v.Results == nil {
		v.Results = []models.CheckResult{}
	}
	// Normalise on copies: the caller's verdict is never changed.
	results := make([]models.CheckResult, len(v.Results))
	for i, r := range v.Results {
		if r.Violations != nil {
			vs := make([]models.Violation, len(r.Violations))
			for j, vi := range r.Violations {
				if vi.Ops == nil {
					vi.Ops = []int64{}
				}
				vs[j] = vi
			}
			r.Violations = vs
		}
		results[i] = r
	}
	v.Results = results
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil { // Encode appends the newline
		return fmt.Errorf("encode verdict: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write verdict: %w", err)
	}
	return nil
}

// ReadVerdict reads a verdict.json (see ParseVerdict).
func ReadVerdict(path string) (models.Verdict, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return models.Verdict{}, fmt.Errorf("read verdict: %w", err)
	}
	return ParseVerdict(path, b)
}

// ParseVerdict decodes a verdict.json; name says which file in errors. It
// refuses a schema version newer than this build understands (the file
// would be misread), and accepts a missing version as 1 (hand-written
// fixtures).
func ParseVerdict(name string, b []byte) (models.Verdict, error) {
	var v models.Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("parse verdict %s: %w", name, err)
	}
	if v.Version == 0 {
		v.Version = 1
	}
	if v.Version > models.VerdictVersion {
		return v, fmt.Errorf("verdict %s: schema version %d is newer than this build reads (%d); upgrade sagachaos", name, v.Version, models.VerdictVersion)
	}
	switch v.Status {
	case models.Valid, models.Invalid, models.Unknown:
	case "":
		if v.Error == "" {
			return v, fmt.Errorf("verdict %s: no status and no error", name)
		}
	default:
		return v, fmt.Errorf("verdict %s: unknown status %q", name, v.Status)
	}
	return v, nil
}
