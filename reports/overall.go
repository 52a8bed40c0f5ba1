package reports

import (
	"fmt"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// overallTimeline is the whole-run chart, computed in Go (it is small
// whatever the run size) and drawn as inline SVG by the template.
type overallTimeline struct {
	W, H, PlotTop, PlotH int
	Bars                 []ovBar
	InFlight             string // SVG polyline points
	Faults               []ovFault
	Ticks                []ovTick
	MaxThroughput        int
	MaxInFlight          int
	Buckets              int
	BucketMS             string
	Orders               int
	Empty                bool
}

type ovBar struct {
	X, Y, W, H string
	N          int
	From, To   string
}

type ovFault struct {
	X, W, LabelX string
	Label, Title string
	Instant      bool
}

type ovTick struct {
	X, Label string
}

const (
	ovWidth   = 1000
	ovHeight  = 170
	ovTop     = 22
	ovPlotH   = 120
	ovBuckets = 100
)

// buildOverall computes throughput (place-order requests answered ok per
// time bucket), in-flight sagas (orders between their first client request
// and their last world effect or client op; observer ops are excluded
// because they are taken after quiescence) and the fault windows.
func buildOverall(h *models.History) overallTimeline {
	ov := overallTimeline{W: ovWidth, H: ovHeight, PlotTop: ovTop, PlotH: ovPlotH, Buckets: ovBuckets}
	var tmax int64
	for _, op := range h.Ops {
		tmax = max(tmax, op.T)
	}
	if len(h.Ops) == 0 || tmax == 0 {
		ov.Empty = true
		return ov
	}
	span := float64(tmax) / ovBuckets
	ov.BucketMS = fmt.Sprintf("%.1f", span/1e6)
	bucket := func(t int64) int {
		b := int(float64(t) / span)
		return min(max(b, 0), ovBuckets-1)
	}
	x := func(t int64) float64 { return float64(t) / float64(tmax) * ovWidth }
	var thr [ovBuckets]int
	first := map[string]int64{}
	lastT := map[string]int64{}
	pendingInvoke := map[string]int64{} // client proc → time of its open invoke
	for _, op := range h.Ops {
		if op.F == models.FPlaceOrder && op.Type == models.Ok {
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
	bw := float64(ovWidth) / ovBuckets
	base := float64(ovTop + ovPlotH)
	for i, n := range thr {
		if n == 0 || ov.MaxThroughput == 0 {
			continue
		}
		hgt := float64(n) / float64(ov.MaxThroughput) * ovPlotH
		ov.Bars = append(ov.Bars, ovBar{X: f1(float64(i)*bw + 0.5), Y: f1(base - hgt), W: f1(bw - 1), H: f1(hgt), N: n,
			From: fmtDur(float64(i)*span, tmax), To: fmtDur(float64(i+1)*span, tmax)})
	}
	var pts strings.Builder
	for i, n := range inflight {
		y := base
		if ov.MaxInFlight > 0 {
			y = base - float64(n)/float64(ov.MaxInFlight)*ovPlotH
		}
		fmt.Fprintf(&pts, "%s,%s ", f1(float64(i)*bw+bw/2), f1(y))
	}
	ov.InFlight = strings.TrimSpace(pts.String())
	for _, f := range faultWindows(h) {
		label := f.Kind
		if f.Target != "" {
			label += " " + f.Target
		}
		title := fmt.Sprintf("%s %.3fs–%.3fs", label, float64(f.Start)/1e9, float64(f.End)/1e9)
		if f.Open {
			title += " (never healed in the history)"
		}
		w := x(f.End) - x(f.Start)
		ov.Faults = append(ov.Faults, ovFault{X: f1(x(f.Start)), W: f1(max(w, 1.5)), LabelX: f1(x(f.Start) + 2),
			Label: oneLine(label, 24), Title: title, Instant: f.Instant})
	}
	for i := 0; i <= 5; i++ {
		t := float64(tmax) * float64(i) / 5
		ov.Ticks = append(ov.Ticks, ovTick{X: f1(float64(ovWidth)*float64(i)/5 - float64(i/5)*40), Label: fmtDur(t, tmax)})
	}
	return ov
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
