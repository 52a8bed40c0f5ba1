package models

// A sweep's summary: one JSON line per run in SummaryFile, in the sweep's
// out directory (the run store). `run --keep failing` deletes the
// directory of a valid run and keeps only its line here; a kept run has a
// line too. `sagachaos report OUT_DIR` reads it, so the merged index
// still counts, plots and lists every run of the sweep.
//
//	{"dir":"20261201T101510-calm-7","kept":false,"duration_ms":4210,"shard":"2/4","verdict":{...verdict.json...}}
//
// The fields are those of the lines the infra stream's sweep writes
// (cmd/sagachaos/sweep.go, ledgerLine), so either side can use this type.

// SummaryFile is the summary's file name inside the out directory.
const SummaryFile = "summary.jsonl"

// RunRecord is one line of SummaryFile.
type RunRecord struct {
	// Dir is the run directory, relative to the summary file's directory
	// (it may no longer exist when Kept is false).
	Dir string `json:"dir"`
	// Kept: the run directory was left on disk (a non-valid run, or every
	// run with --keep all).
	Kept bool `json:"kept"`
	// DurationMS is the run's wall time, when known.
	DurationMS int64 `json:"duration_ms"`
	// Shard is the --shard i/n the run belonged to, if any.
	Shard string `json:"shard,omitempty"`
	// Verdict is the run's verdict.json, whole (a valid run's is small).
	Verdict Verdict `json:"verdict"`
}
