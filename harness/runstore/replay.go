package runstore

import (
	"strconv"
	"strings"
	"time"
)

// Replay is what a replay line says. Every line the tool prints to replay a
// run is built by Line, so the flags it writes are the flags the CLI reads.
type Replay struct {
	// RunDir, when set, makes the line `sagachaos repro RunDir`: the exact
	// scenario.json of that run, whatever generated it. The fields below
	// are then ignored.
	RunDir string

	// Target is --target as the user gave it (a name under targets/ or a
	// manifest path).
	Target string
	// Mutant is --mutant; empty: the correct target.
	Mutant string
	// Scenario is --scenario as the user gave it (a name or a file).
	Scenario string
	// Exact: Scenario is a concrete scenario.json (a corpus entry, a run's
	// scenario.json), which runs as written: no --seed.
	Exact bool
	Seed  uint64
	// TimeLimit is --time-limit; zero: the scenario's own.
	TimeLimit time.Duration
	// Flags are further flags that change what runs (the environment
	// providers, e.g. --postgres dsn), already split into words.
	Flags []string
}

// Line is the command line, shell-quoted where a word needs it.
func (r Replay) Line() string {
	if r.RunDir != "" {
		return join("sagachaos", "repro", r.RunDir)
	}
	w := []string{"sagachaos", "run"}
	if r.Target != "" {
		w = append(w, "--target", r.Target)
	}
	if r.Mutant != "" {
		w = append(w, "--mutant", r.Mutant)
	}
	w = append(w, "--scenario", r.Scenario)
	if !r.Exact {
		w = append(w, "--seed", strconv.FormatUint(r.Seed, 10))
	}
	if r.TimeLimit > 0 {
		w = append(w, "--time-limit", r.TimeLimit.String())
	}
	w = append(w, r.Flags...)
	return join(w...)
}

func join(words ...string) string {
	for i, s := range words {
		words[i] = quote(s)
	}
	return strings.Join(words, " ")
}

// quote single-quotes a word a POSIX shell would split or expand.
func quote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == ',' || r == '=' || r == '@' || r == '+' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
