package reports

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

// WriteTerminal writes the end-of-run summary: the verdict line, one line per
// checker (with the first violation of a failing one), where the report is,
// and the command that replays the run. color adds ANSI colours; the caller
// decides (a TTY, NO_COLOR), so that logs and CI output stay plain.
func WriteTerminal(w io.Writer, v models.Verdict, reportPath string, color bool) error {
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	var b strings.Builder
	status := strings.ToUpper(string(v.Status))
	if v.Error != "" {
		status = "ERROR"
	}
	fmt.Fprintf(&b, "sagachaos: %s  %s  ops=%d\n", paint(ansiBold+statusColor(v.Status, v.Error != ""), status), clean(runLabel(v.Run)), v.Ops)
	if v.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", clean(v.Error))
	}
	if v.Interrupted {
		fmt.Fprintf(&b, "  %s\n", paint(ansiYellow, "interrupted: the run was stopped before it finished"))
	}
	width := 0
	for _, r := range v.Results {
		width = max(width, len(r.Checker))
	}
	for _, r := range v.Results {
		mark := map[models.Status]string{models.Valid: "ok", models.Invalid: "FAIL", models.Unknown: "??"}[r.Status]
		if mark == "" {
			mark = "??"
		}
		shown := string(r.Status)
		if r.NotApplicable != "" {
			mark, shown = "n/a", "not applicable"
		}
		line := paint(statusColor(r.Status, false), fmt.Sprintf("  %-4s %-*s  %s", mark, width, clean(r.Checker), shown))
		detail := ""
		switch r.Status {
		case models.Invalid:
			detail = fmt.Sprintf("%d violation(s)", len(r.Violations))
			if len(r.Violations) > 0 {
				f := r.Violations[0]
				d := f.Kind + ": " + f.Message
				if f.Order != "" {
					d = "order " + f.Order + " " + d
				}
				detail += " — " + clean(oneLine(d, 140))
			}
		case models.Unknown:
			if r.Unknown != "" {
				detail = paint(ansiDim, clean(oneLine(r.Unknown, 140)))
			}
		case models.Valid:
			if r.NotApplicable != "" {
				detail = paint(ansiDim, clean(oneLine(r.NotApplicable, 140)))
			} else if d := strings.TrimSpace(statsLine(r.Stats) + " " + rulesNALine(r.RulesNotApplicable, false)); d != "" {
				detail = paint(ansiDim, clean(oneLine(d, 140)))
			}
		}
		if detail != "" {
			line += strings.Repeat(" ", max(0, 7-len(shown))) + " " + detail
		}
		b.WriteString(line + "\n")
	}
	if reportPath != "" {
		fmt.Fprintf(&b, "report: %s\n", reportPath)
	}
	if v.Run.Repro != "" && (v.Status != models.Valid || v.Error != "") {
		fmt.Fprintf(&b, "repro:  %s\n", paint(ansiBold, clean(v.Run.Repro)))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write terminal summary: %w", err)
	}
	return nil
}

func statusColor(s models.Status, isErr bool) string {
	if isErr {
		return ansiRed
	}
	switch s {
	case models.Valid:
		return ansiGreen
	case models.Invalid:
		return ansiRed
	}
	return ansiYellow
}

func runLabel(r models.RunInfo) string {
	parts := []string{"target=" + r.Target}
	if r.Mutant != "" {
		parts = append(parts, "mutant="+r.Mutant)
	}
	parts = append(parts, "scenario="+r.Scenario, "seed="+strconv.FormatUint(r.Seed, 10))
	return strings.Join(parts, " ")
}

// statsLine renders checker stats in key order so output is stable.
func statsLine(st map[string]int64) string {
	keys := make([]string, 0, len(st))
	for k := range st {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatInt(st[k], 10)
	}
	return strings.Join(parts, " ")
}

// rulesNALine names the rules a checker did not apply ("vanished-row n/a"),
// with their reasons when why is set; "" when it applied them all.
func rulesNALine(rules map[string]string, why bool) string {
	keys := make([]string, 0, len(rules))
	for k := range rules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " n/a"
		if why {
			parts[i] += " (" + rules[k] + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// oneLine collapses whitespace and caps s for a terminal line; the full text
// is in the report.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// clean redacts s and makes control characters visible (\x1b → "\x1b"),
// so that target data in a violation message cannot drive the terminal
// (colour, cursor moves, title changes) or break the one-line layout.
func clean(s string) string {
	s = Redact(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
