package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// The JUnit XML shape most CI systems read (Jenkins, GitLab, GitHub actions
// reporters): testsuites > testsuite > testcase with failure / error /
// skipped children and consistent counts on the parents.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes v as junit.xml: one testsuite for the run (named
// "<target>[/<mutant>] <scenario> seed=<n>"), one testcase per checker.
//
//   - invalid → <failure>, message = the first violation, body = every
//     violation (checker, kind, order, message, op indices) and the repro
//     command;
//   - unknown → <skipped message="unknown: what the history lacked">: the
//     invariant was neither proven nor broken. CI does not count a skip as a
//     failure, which is why the CLI's exit code 3 (not this file) is what
//     gates an unknown run;
//   - a run-level error (Verdict.Error) → one extra testcase "run" carrying
//     <error>, so that a run that never produced a verdict is red in CI.
//
// All strings pass through Redact.
func WriteJUnit(w io.Writer, v models.Verdict) error {
	return WriteJUnitRuns(w, []models.Verdict{v})
}

// WriteJUnitRuns writes one junit.xml for many runs (a sweep, a shard, a
// merged campaign): one testsuite per run as WriteJUnit makes it, with the
// totals of all of them on <testsuites>.
func WriteJUnitRuns(w io.Writer, vs []models.Verdict) error {
	doc := junitSuites{Name: "sagachaos", Time: "0"}
	for _, v := range vs {
		s := junitSuiteOf(v)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
		doc.Suites = append(doc.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("encode junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

func junitSuiteOf(v models.Verdict) junitSuite {
	suite := junitSuite{Name: Redact(suiteName(v.Run)), Time: "0"}
	for _, p := range []junitProperty{
		{"target", v.Run.Target}, {"mutant", v.Run.Mutant}, {"scenario", v.Run.Scenario},
		{"seed", strconv.FormatUint(v.Run.Seed, 10)}, {"run", v.Run.ID}, {"repro", v.Run.Repro},
		{"status", string(v.Status)}, {"ops", strconv.Itoa(v.Ops)},
	} {
		if p.Value != "" {
			p.Value = Redact(p.Value)
			suite.Properties = append(suite.Properties, p)
		}
	}
	class := "sagachaos." + classPart(v.Run.Target)
	if v.Run.Mutant != "" {
		class += "." + classPart(v.Run.Mutant)
	}
	class += "." + classPart(v.Run.Scenario)
	for _, r := range v.Results {
		c := junitCase{Name: Redact(r.Checker), Classname: class, Time: "0"}
		switch r.Status {
		case models.Invalid:
			c.Failure = failureOf(r, v.Run.Repro)
			suite.Failures++
		case models.Unknown:
			msg := "unknown"
			if r.Unknown != "" {
				msg = "unknown: " + r.Unknown
			}
			c.Skipped = &junitMessage{Message: Redact(msg)}
			suite.Skipped++
		case models.Valid:
			if len(r.Stats) > 0 {
				c.SystemOut = Redact(statsLine(r.Stats))
			}
		default:
			c.Error = &junitMessage{Message: Redact(fmt.Sprintf("checker returned status %q", r.Status)), Type: "bad-status"}
			suite.Errors++
		}
		suite.Cases = append(suite.Cases, c)
	}
	if v.Error != "" || v.Interrupted {
		msg := v.Error
		if msg == "" {
			msg = "run interrupted before it finished"
		}
		body := msg
		if v.Run.Repro != "" {
			body += "\n\nreproduce: " + v.Run.Repro
		}
		suite.Cases = append(suite.Cases, junitCase{Name: "run", Classname: class, Time: "0",
			Error: &junitMessage{Message: Redact(firstLine(msg)), Type: "run-error", Body: Redact(body)}})
		suite.Errors++
	}
	suite.Tests = len(suite.Cases)
	return suite
}

func failureOf(r models.CheckResult, repro string) *junitMessage {
	var b strings.Builder
	msg := "invariant violated"
	typ := "violation"
	if len(r.Violations) > 0 {
		first := r.Violations[0]
		msg = first.Message
		if first.Order != "" {
			msg = "order " + first.Order + ": " + msg
		}
		typ = first.Kind
		if len(r.Violations) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(r.Violations)-1)
		}
	}
	fmt.Fprintf(&b, "%s: %d violation(s)\n", r.Checker, len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "- [%s] ", v.Kind)
		if v.Order != "" {
			fmt.Fprintf(&b, "order %s: ", v.Order)
		}
		fmt.Fprintf(&b, "%s (ops %s)\n", v.Message, joinInts(v.Ops))
	}
	if repro != "" {
		fmt.Fprintf(&b, "\nreproduce: %s\n", repro)
	}
	return &junitMessage{Message: Redact(msg), Type: Redact(typ), Body: Redact(b.String())}
}

func suiteName(r models.RunInfo) string {
	s := r.Target
	if s == "" {
		s = "target"
	}
	if r.Mutant != "" {
		s += "/" + r.Mutant
	}
	if r.Scenario != "" {
		s += " " + r.Scenario
	}
	return s + " seed=" + strconv.FormatUint(r.Seed, 10)
}

// classPart keeps a classname segment free of dots and spaces, which JUnit
// viewers use as package separators.
func classPart(s string) string {
	if s == "" {
		return "none"
	}
	return strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '/' {
			return '_'
		}
		return r
	}, s)
}

func joinInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = "#" + strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, " ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
