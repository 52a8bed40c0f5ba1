package models

// Status is a three-way verdict: the history proves the invariant holds
// (valid), proves it broken (invalid), or lacks the evidence to say
// (unknown).
type Status string

// Verdict statuses.
const (
	Valid   Status = "valid"
	Invalid Status = "invalid"
	Unknown Status = "unknown"
)

// Violation is one proven breach of an invariant.
type Violation struct {
	Checker string `json:"checker"`
	// Kind is a stable short name of the violation class within the checker
	// (e.g. "double-charge"); checker+kind is the signature reports group by.
	Kind    string `json:"kind"`
	Order   string `json:"order,omitempty"`
	Message string `json:"message"`
	// Ops are the indices of the ops that prove it.
	Ops []int64 `json:"ops"`
}

// CheckResult is one checker's verdict.
type CheckResult struct {
	Checker    string      `json:"checker"`
	Status     Status      `json:"status"`
	Violations []Violation `json:"violations,omitempty"`
	// Unknown names what the history lacked, when Status is Unknown.
	Unknown string `json:"unknown,omitempty"`
	// NotApplicable, with Status Valid, says why the invariant had nothing
	// to judge in this history (e.g. no consumer is declared, or the
	// history predates the declarations the invariant reads).
	NotApplicable string `json:"not_applicable,omitempty"`
	// RulesNotApplicable names, by violation kind, the rules of the checker
	// that this history gives nothing to apply to, and why (e.g.
	// vanished-row for a target whose records carry no seq); the rest of
	// the invariant was judged and Status says how.
	RulesNotApplicable map[string]string `json:"rules_not_applicable,omitempty"`
	Stats              map[string]int64  `json:"stats,omitempty"`
}

// VerdictVersion is the version of the verdict.json schema (docs/verdict.md).
const VerdictVersion = 1

// Verdict is the composed result of all checkers over one history; it is
// what verdict.json holds.
type Verdict struct {
	Version int     `json:"version"`
	Status  Status  `json:"status"`
	Run     RunInfo `json:"run"`
	Ops     int     `json:"ops"`
	// HistoryDigest is the History.Digest of the history judged ("sha256:…"
	// of history.jsonl's bytes); empty when it was built in memory. A
	// verdict whose digest differs from its history's is stale: re-check.
	HistoryDigest string        `json:"history_digest,omitempty"`
	Results       []CheckResult `json:"results"`
	// Error is set when the run could not produce a verdict (exit code 2).
	Error string `json:"error,omitempty"`
	// Interrupted is set when the run was stopped before it finished.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Compose folds checker results into one status: any invalid → invalid;
// else any unknown → unknown; else valid.
func Compose(results []CheckResult) Status {
	st := Valid
	for _, r := range results {
		switch r.Status {
		case Invalid:
			return Invalid
		case Unknown:
			st = Unknown
		}
	}
	return st
}

// ExitCode maps a verdict status to the CLI contract (DESIGN §8): 0 valid,
// 1 invalid, 3 unknown. Errors (2) are decided by the caller.
func (s Status) ExitCode() int {
	switch s {
	case Valid:
		return 0
	case Invalid:
		return 1
	default:
		return 3
	}
}
