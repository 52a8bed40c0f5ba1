package reports

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
)

// compData is the component lanes as the script draws them in the
// per-order timelines.
type compData struct {
	Lanes []string `json:"lanes"`
	// Marks: [t µs, lane#, kind, label, op, title, has-log (0/1)].
	Marks [][]any `json:"marks"`
	// Spans: [lane#, kind, start µs, end µs, op].
	Spans [][]any `json:"spans"`
}

func compJSON(c *components) compData {
	d := compData{Lanes: []string{}, Marks: [][]any{}, Spans: [][]any{}}
	if c == nil {
		return d
	}
	lane := map[string]int{}
	for k, n := range c.Lanes {
		lane[n] = k
		d.Lanes = append(d.Lanes, Redact(n))
	}
	for _, m := range c.Marks {
		k, ok := lane[m.Inst]
		if !ok {
			continue
		}
		hasLog := 0
		if m.Log >= 0 {
			hasLog = 1
		}
		d.Marks = append(d.Marks, []any{m.T / 1000, k, m.Kind, Redact(m.Label), m.Op, Redact(markTitle(m)), hasLog})
	}
	for _, s := range c.Spans {
		k, ok := lane[s.Inst]
		if !ok {
			continue
		}
		d.Spans = append(d.Spans, []any{k, s.Kind, s.S / 1000, s.E / 1000, s.Op})
	}
	return d
}

// markTitle is a mark's tooltip: what, when, which op, and where in the log.
func markTitle(m compMark) string {
	s := fmt.Sprintf("%s · %s · op #%d", m.Title, fmtT(m.T), m.Op)
	if m.Borrowed {
		s += " (time of that op)"
	}
	return s
}

// compSection is the page's list of component events, per instance, each
// with the log lines around it: the anchor (#op-N) every component mark
// and narrative clause links to.
type compSection struct {
	Instances []compInstView
	FromOps   bool
	Dropped   int
	Any       bool
}

type compInstView struct {
	Name      string
	Open      bool
	Summary   string
	Events    []compEventView
	OrderOnly []string
}

type compEventView struct {
	Op       int64
	Anchor   bool // first row for this op (ids are unique)
	T        string
	Kind     string
	What     string
	Borrowed bool
	Log      *logView
}

type logView struct {
	File, Why string
	Href      template.URL
	Line      int
	Total     int
	Cut       bool
	Lines     []logLineView
}

type logLineView struct {
	N    int
	Hit  bool
	Text string
}

func buildCompSection(c *components) compSection {
	var s compSection
	if c == nil {
		return s
	}
	s.FromOps, s.Dropped = c.FromOps, c.Dropped
	byInst := map[string][]compMark{}
	for _, m := range c.Marks {
		byInst[m.Inst] = append(byInst[m.Inst], m)
	}
	anchored := map[int64]bool{}
	for _, inst := range c.Lanes {
		iv := compInstView{Name: Redact(inst)}
		counts := map[string]int{}
		for _, m := range byInst[inst] {
			if m.Kind == cmStart && m.Label == "restart" {
				counts["restart"]++
			} else {
				counts[m.Kind]++
			}
			ev := compEventView{Op: m.Op, Anchor: !anchored[m.Op], T: fmtT(m.T), Kind: m.Kind, What: Redact(m.Title), Borrowed: m.Borrowed}
			anchored[m.Op] = true
			if m.Log >= 0 && m.Log < len(c.Logs) {
				ev.Log = excerptView(c.Logs[m.Log])
			}
			iv.Events = append(iv.Events, ev)
		}
		for _, line := range c.OrderOnly[inst] {
			iv.OrderOnly = append(iv.OrderOnly, Redact(line))
		}
		iv.Open = counts[cmCrash] > 0 || counts[cmFired] > 0
		var parts []string
		for _, k := range []struct{ kind, one, many string }{
			{cmStart, "start", "starts"}, {"restart", "restart", "restarts"}, {cmCrash, "crash", "crashes"}, {cmExit, "stop", "stops"},
			{cmFired, "failpoint fired", "failpoints fired"}, {cmReached, "failpoint reached", "failpoints reached"}} {
			switch n := counts[k.kind]; n {
			case 0:
			case 1:
				parts = append(parts, "1 "+k.one)
			default:
				parts = append(parts, strconv.Itoa(n)+" "+k.many)
			}
		}
		paused := 0
		for _, sp := range c.Spans {
			if sp.Inst == inst && sp.Kind == csPaused {
				paused++
			}
		}
		if paused > 0 {
			parts = append(parts, fmt.Sprintf("paused %d×", paused))
		}
		if len(iv.OrderOnly) > 0 {
			parts = append(parts, fmt.Sprintf("%d failpoint line(s) without time", len(iv.OrderOnly)))
		}
		iv.Summary = strings.Join(parts, ", ")
		s.Instances = append(s.Instances, iv)
	}
	s.Any = len(s.Instances) > 0
	return s
}

func excerptView(e logExcerpt) *logView {
	lv := &logView{File: e.File, Why: e.Why, Href: template.URL(e.Href), Line: e.Line, Total: e.Total, Cut: e.Cut}
	for k, l := range e.Lines {
		n := e.From + k
		lv.Lines = append(lv.Lines, logLineView{N: n, Hit: n == e.Line, Text: l})
	}
	return lv
}
