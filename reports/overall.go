package reports

import (
	"fmt"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// overallTimeline is the whole-run chart, computed in Go (it is small
// whatever the run size) and drawn as inline SVG by the template: fault
// labels in rows on top, throughput and in-flight sagas, then one lane per
// component instance with what it did. It scales uniformly (text is never
// stretched), so a layout free of overlaps in SVG units is free of them on
// screen.
type overallTimeline struct {
	W, H, GL, PlotTop, PlotH, PlotBottom, AxisY, TickY int
	FaultTop, FaultH                                   int
	Bars                                               []ovBar
	InFlight                                           string // SVG polyline points
	Faults                                             []ovFault
	Hidden                                             []string // fault labels left out for room (in the tooltips)
	Ticks                                              []ovTick
	Lanes                                              []ovLane
	MaxThroughput                                      int
	MaxInFlight                                        int
	Buckets                                            int
	BucketMS                                           string
	Orders                                             int
	Empty                                              bool
}

type ovBar struct {
	X, Y, W, H string
	N          int
	From, To   string
}

type ovFault struct {
	X, W         string
	Label, Title string
	LabelX       string
	LabelY       int
	Instant      bool
}

type ovTick struct {
	X, Label string
}

type ovLane struct {
	Name          string
	Y, NameY, Top int
	Marks         []ovMark
	Spans         []ovSpan
	Labels        []ovLabel
}

type ovMark struct {
	D, Kind, Title string
	Op             int64
}

type ovSpan struct {
	X1, X2, Kind string
	Y            int
	Rect         bool
	RX, RY, RW   string
}

type ovLabel struct {
	X     string
	Y     int
	Text  string
	Title string
}

const (
	ovWidth     = 1000
	ovGutter    = 120 // lane names
	ovRight     = 10
	ovPlotH     = 110
	ovBuckets   = 100
	ovLabelPx   = 9
	ovFaultRows = 3
	ovRowH      = 12 // clears a 9 px label's box (about 1.17 em)
	ovLaneH     = 24
)

// buildOverall computes throughput (place-order requests answered ok per
// time bucket), in-flight sagas (orders between their first client request
// and their last world effect or client op; observer ops are excluded
// because they are taken after quiescence), the fault windows and the
// component lanes.
func buildOverall(h *models.History, faults []faultWindow, comp *components) overallTimeline {
	ov := overallTimeline{W: ovWidth, GL: ovGutter, PlotH: ovPlotH, Buckets: ovBuckets}
	var tmax int64
	for _, op := range h.Ops {
		tmax = max(tmax, op.T)
	}
	if len(h.Ops) == 0 || tmax == 0 {
		ov.Empty = true
		return ov
	}
	pw := float64(ovWidth - ovGutter - ovRight)
	span := float64(tmax) / ovBuckets
	ov.BucketMS = fmt.Sprintf("%.1f", span/1e6)
	bucket := func(t int64) int {
		b := int(float64(t) / span)
		return min(max(b, 0), ovBuckets-1)
	}
	x := func(t int64) float64 { return ovGutter + float64(min(max(t, 0), tmax))/float64(tmax)*pw }
	var thr [ovBuckets]int
	first := map[string]int64{}
	lastT := map[string]int64{}
	pendingInvoke := map[string]int64{} // client proc → time of its open invoke
	for _, op := range h.Ops {
		if strings.HasPrefix(op.Proc, models.ProcClientPfx) && op.Type == models.Ok { // a saga start acknowledged
			thr[bucket(op.T)]++
		}
		if strings.HasPrefix(op.Proc, models.ProcClientPfx) {
			if op.Type == models.Invoke {
				pendingInvoke[op.Proc] = op.T
			} else if t, ok := pendingInvoke[op.Proc]; ok {
				delete(pendingInvoke, op.Proc)
				if _, seen := first[op.Order]; op.Order != "" && !seen {
					first[op.Order] = t // the saga started when its request was sent
				}
			}
		}
		if op.Order == "" || op.Proc == models.ProcObserver || op.Type == models.State || op.Type == models.Event {
			continue
		}
		if strings.HasPrefix(op.Proc, models.ProcClientPfx) {
			if _, ok := first[op.Order]; !ok {
				first[op.Order] = op.T
			}
		}
		lastT[op.Order] = max(lastT[op.Order], op.T)
	}
	ov.Orders = len(first)
	var diff [ovBuckets + 1]int
	for o, s := range first {
		diff[bucket(s)]++
		diff[bucket(lastT[o])+1]--
	}
	inflight := make([]int, ovBuckets)
	cur := 0
	for i := range ovBuckets {
		cur += diff[i]
		inflight[i] = cur
		ov.MaxInFlight = max(ov.MaxInFlight, cur)
		ov.MaxThroughput = max(ov.MaxThroughput, thr[i])
	}

	// Fault labels: up to ovFaultRows rows on top; the rest are listed
	// under the chart and kept in each window's tooltip.
	reqs := make([]labelReq, len(faults))
	labels := make([]string, len(faults))
	onLane := map[string]bool{}
	for _, l := range drawnLanes(comp) {
		onLane[l] = true
	}
	for k, f := range faults {
		label := f.Kind
		if f.Target != "" {
			label += " " + f.Target
		}
		labels[k] = label
		if f.Instant && onLane[f.Target] && componentFault(f.Kind) {
			continue // the component's lane tells it, with a label of its own
		}
		reqs[k] = labelReq{X: x(f.Start) + 2, Text: oneLine(label, 32)}
	}
	pos := layoutRows(reqs, ovFaultRows, ovLabelPx, 4, ovGutter, ovWidth-ovRight)
	rowsUsed := 0
	for _, p := range pos {
		rowsUsed = max(rowsUsed, p.Row+1)
	}
	ov.FaultTop = 4 + rowsUsed*ovRowH
	ov.PlotTop = ov.FaultTop + 4
	ov.PlotBottom = ov.PlotTop + ovPlotH
	ov.AxisY = ov.PlotBottom
	ov.TickY = ov.PlotBottom + 13

	bw := pw / ovBuckets
	base := float64(ov.PlotBottom)
	for i, n := range thr {
		if n == 0 || ov.MaxThroughput == 0 {
			continue
		}
		hgt := float64(n) / float64(ov.MaxThroughput) * ovPlotH
		ov.Bars = append(ov.Bars, ovBar{X: f1(ovGutter + float64(i)*bw + 0.5), Y: f1(base - hgt), W: f1(bw - 1), H: f1(hgt), N: n,
			From: fmtDur(float64(i)*span, tmax), To: fmtDur(float64(i+1)*span, tmax)})
	}
	var pts strings.Builder
	for i, n := range inflight {
		y := base
		if ov.MaxInFlight > 0 {
			y = base - float64(n)/float64(ov.MaxInFlight)*ovPlotH
		}
		fmt.Fprintf(&pts, "%s,%s ", f1(ovGutter+float64(i)*bw+bw/2), f1(y))
	}
	ov.InFlight = strings.TrimSpace(pts.String())

	// Component lanes under the axis.
	laneTop := ov.TickY + 8
	ov.Lanes = overallLanes(comp, x, laneTop, tmax)
	ov.H = laneTop + len(ov.Lanes)*ovLaneH + 4
	if len(ov.Lanes) == 0 {
		ov.H = ov.TickY + 6
	}
	ov.FaultH = ov.H - ov.FaultTop

	for k, f := range faults {
		title := fmt.Sprintf("%s %.3fs–%.3fs", labels[k], float64(f.Start)/1e9, float64(f.End)/1e9)
		if f.Open {
			title += " (never healed in the history)"
		}
		if f.Err != "" {
			title += " — error: " + f.Err
		}
		w := x(f.End) - x(f.Start)
		of := ovFault{X: f1(x(f.Start)), W: f1(max(w, 1.5)), Title: title, Instant: f.Instant}
		if p := pos[k]; p.Row >= 0 {
			of.Label, of.LabelX, of.LabelY = p.Text, f1(p.X), 4+ovLabelPx+p.Row*ovRowH-1
		} else if reqs[k].Text != "" {
			ov.Hidden = append(ov.Hidden, fmt.Sprintf("%s at %s", labels[k], fmtT(f.Start)))
		}
		ov.Faults = append(ov.Faults, of)
	}
	for i := 0; i <= 5; i++ {
		t := float64(tmax) * float64(i) / 5
		lx := ovGutter + pw*float64(i)/5
		label := fmtDur(t, tmax)
		if i == 5 {
			lx -= textWidth(label, ovLabelPx+1) + 2
		}
		ov.Ticks = append(ov.Ticks, ovTick{X: f1(lx), Label: label})
	}
	return ov
}

// overallLanes draws each instance's spans, marks and labels (one row of
// labels per lane, each shortened to end before the next labelled mark).
func overallLanes(comp *components, x func(int64) float64, top int, tmax int64) []ovLane {
	if comp == nil {
		return nil
	}
	names := drawnLanes(comp)
	lanes := make([]ovLane, 0, len(names))
	idx := map[string]int{}
	for k, name := range names {
		y := top + k*ovLaneH + 16 // the line; a row of labels above it
		idx[name] = k
		lanes = append(lanes, ovLane{Name: clipWidth(Redact(name), ovGutter-10, ovLabelPx), Y: y, NameY: y + 3, Top: top + k*ovLaneH})
	}
	for _, s := range comp.Spans {
		k, ok := idx[s.Inst]
		if !ok {
			continue
		}
		l := &lanes[k]
		sp := ovSpan{X1: f1(x(s.S)), X2: f1(max(x(s.E), x(s.S)+1)), Kind: s.Kind, Y: l.Y}
		if s.Kind == csPaused {
			sp.Rect, sp.RX, sp.RY, sp.RW = true, f1(x(s.S)), fmt.Sprint(l.Y-4), f1(max(x(s.E)-x(s.S), 1.5))
		}
		l.Spans = append(l.Spans, sp)
	}
	labelled := func(m compMark) bool { return m.Label != "" && m.Kind != cmHealthy && m.Kind != cmReached }
	perLane := make([][]compMark, len(lanes))
	for _, m := range comp.Marks {
		if k, ok := idx[m.Inst]; ok {
			perLane[k] = append(perLane[k], m)
		}
	}
	for k, ms := range perLane {
		l := &lanes[k]
		var reqs []labelReq
		var who []compMark
		for j, m := range ms {
			cx := x(m.T)
			l.Marks = append(l.Marks, ovMark{D: markPath(m.Kind, cx, float64(l.Y), 1), Kind: m.Kind, Title: Redact(markTitle(m)), Op: m.Op})
			if !labelled(m) {
				continue
			}
			limit := 0.0
			for _, n := range ms[j+1:] {
				if labelled(n) && x(n.T) > cx+1 {
					limit = x(n.T) - 6
					break
				}
			}
			short := ""
			if i := strings.Index(m.Label, " at "); i > 0 {
				short = m.Label[:i] // "crash at relay.after-publish" → "crash"
			}
			reqs = append(reqs, labelReq{X: cx + 6, Text: Redact(m.Label), Short: Redact(short), Limit: limit, Mark: cx})
			who = append(who, m)
		}
		// Row 0 is on the lane's line, each label ending before the next
		// mark; what does not fit there goes to row 1, above the marks.
		var again []labelReq
		var againWho []compMark
		for j, p := range layoutRows(reqs, 1, ovLabelPx, 4, ovGutter, ovWidth-ovRight) {
			if p.Row < 0 {
				q := reqs[j]
				q.Limit = 0
				again = append(again, q)
				againWho = append(againWho, who[j])
				continue
			}
			l.Labels = append(l.Labels, ovLabel{X: f1(p.X), Y: l.Y + 3, Text: p.Text, Title: Redact(markTitle(who[j]))})
		}
		// In row 1 a label ends before the next one that wants row 1
		// (shortened to "crash" if "crash at …" does not fit).
		for j := range again {
			if j+1 < len(again) && again[j+1].X > again[j].X {
				again[j].Limit = again[j+1].X - 4
			}
		}
		for j, p := range layoutRows(again, 1, ovLabelPx, 4, ovGutter, ovWidth-ovRight) {
			if p.Row >= 0 {
				l.Labels = append(l.Labels, ovLabel{X: f1(p.X), Y: l.Top + 8, Text: p.Text, Title: Redact(markTitle(againWho[j]))})
			}
		}
	}
	return lanes
}

// drawnLanes are the instances with a mark or a span to draw (an
// instance known only from time-less failpoint lines has none).
func drawnLanes(comp *components) []string {
	if comp == nil {
		return nil
	}
	has := map[string]bool{}
	for _, m := range comp.Marks {
		has[m.Inst] = true
	}
	for _, s := range comp.Spans {
		has[s.Inst] = true
	}
	var out []string
	for _, l := range comp.Lanes {
		if has[l] {
			out = append(out, l)
		}
	}
	return out
}

// componentFault: a fault kind that acts on one component instance.
func componentFault(kind string) bool {
	switch kind {
	case "kill", "pause", "crash", "restart", "rewind":
		return true
	}
	return false
}

// markPath is the SVG path of a component mark at (x, y), scale s (1 on
// the whole-run chart; the script draws the same shapes larger).
func markPath(kind string, x, y, s float64) string {
	p := func(dx, dy float64) string { return f1(x+dx*s) + "," + f1(y+dy*s) }
	switch kind {
	case cmStart:
		return "M" + p(-3, -4) + "L" + p(4, 0) + "L" + p(-3, 4) + "Z"
	case cmHealthy:
		return "M" + p(0, -4) + "L" + p(0, 4)
	case cmCrash, cmExit:
		return "M" + p(-3.5, -3.5) + "L" + p(3.5, 3.5) + "M" + p(-3.5, 3.5) + "L" + p(3.5, -3.5)
	case cmFired:
		return "M" + p(0, -4.5) + "L" + p(4.5, 0) + "L" + p(0, 4.5) + "L" + p(-4.5, 0) + "Z"
	}
	return "M" + p(-2, 0) + "a" + f1(2*s) + "," + f1(2*s) + " 0 1,0 " + f1(4*s) + ",0a" + f1(2*s) + "," + f1(2*s) + " 0 1,0 " + f1(-4*s) + ",0"
}

// fmtDur labels an axis tick in a unit that suits the whole span.
func fmtDur(t float64, span int64) string {
	switch {
	case span < 2e6:
		return fmt.Sprintf("%.0fµs", t/1e3)
	case span < 10e9:
		return fmt.Sprintf("%.0fms", t/1e6)
	}
	return fmt.Sprintf("%.1fs", t/1e9)
}

func f1(f float64) string { return fmt.Sprintf("%.1f", f) }
