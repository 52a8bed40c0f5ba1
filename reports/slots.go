package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// slotChart is the replication-slot lag over time of a CDC target's run:
// one line per declared slot (WAL written since the slot's confirmed
// position, from the history's FSlots samples), on the whole-run chart's
// time axis, with the same fault windows, a mark where the slot changed
// holder and a gap where the server could not be read. A run without
// samples has no chart (Any false).
type slotChart struct {
	Any                         bool
	W, H, GL, PlotTop, AxisY    int
	TickY                       int
	Lines                       []slotLine
	Faults                      []ovFault
	Ticks                       []ovTick
	Max                         string // the y axis' top, in bytes
	Samples, Unreadable         int
	Final                       []slotFinal
	HolderMarks                 []slotMark
	MaxLabelY, ZeroY, LegendTop int
}

type slotLine struct {
	DB, Class string
	Points    []string // polylines, split where the server was unreadable
	Max       string
	LabelX    string
	LabelY    int
}

type slotMark struct {
	X, Y1, Y2 string
	Title     string
}

type slotFinal struct {
	DB, Slot, Holder, Confirmed, Lag, Retained string
}

const (
	slPlotH = 90
	slTop   = 8
)

func buildSlotChart(h *models.History, faults []faultWindow) slotChart {
	c := slotChart{W: ovWidth, GL: ovGutter}
	var tmax int64
	for _, op := range h.Ops {
		tmax = max(tmax, op.T)
	}
	type pt struct {
		t   int64
		lag int64
		ok  bool // false: the server was unreadable (a gap)
	}
	series := map[string][]pt{}
	holders := map[string]string{}
	var order []string
	var maxLag int64
	type change struct {
		db, from, to string
		t            int64
	}
	var changes []change
	for _, op := range h.Ops {
		if op.F != models.FSlots || op.Proc != models.ProcObserver {
			continue
		}
		var s models.SlotSample
		if op.Decode(&s) != nil {
			continue
		}
		c.Samples++
		if s.Error != "" {
			c.Unreadable++
			for _, db := range order {
				series[db] = append(series[db], pt{t: op.T})
			}
			continue
		}
		for _, st := range s.Slots {
			if _, seen := series[st.DB]; !seen {
				order = append(order, st.DB)
			}
			series[st.DB] = append(series[st.DB], pt{t: op.T, lag: st.LagBytes, ok: st.Exists})
			maxLag = max(maxLag, st.LagBytes)
			holder := st.Holder
			if holder == "" && st.Active {
				holder = fmt.Sprintf("pid %d", st.HolderPID)
			}
			if prev, ok := holders[st.DB]; ok && prev != holder {
				changes = append(changes, change{db: st.DB, from: prev, to: holder, t: op.T})
			}
			holders[st.DB] = holder
			if s.At == models.SlotsAtObserve {
				c.Final = append(c.Final, slotFinal{DB: Redact(st.DB), Slot: Redact(st.Slot), Holder: Redact(slotDash(holder)),
					Confirmed: slotDash(st.ConfirmedLSN), Lag: humanBytes(st.LagBytes), Retained: humanBytes(st.RetainedBytes)})
			}
		}
	}
	if c.Samples == 0 || tmax == 0 || len(order) == 0 {
		return c
	}
	c.Any = true
	if maxLag <= 0 {
		maxLag = 1
	}
	c.Max = humanBytes(maxLag)
	pw := float64(ovWidth - ovGutter - ovRight)
	x := func(t int64) float64 { return ovGutter + float64(min(max(t, 0), tmax))/float64(tmax)*pw }
	c.PlotTop = slTop
	c.AxisY = slTop + slPlotH
	c.TickY = c.AxisY + 13
	c.MaxLabelY = slTop + 9
	c.ZeroY = c.AxisY
	y := func(lag int64) float64 { return float64(c.AxisY) - float64(lag)/float64(maxLag)*slPlotH }
	for k, db := range order {
		l := slotLine{DB: Redact(db), Class: fmt.Sprintf("sl%d", k%6)}
		var cur strings.Builder
		var lmax int64
		flush := func() {
			if cur.Len() > 0 {
				l.Points = append(l.Points, strings.TrimSpace(cur.String()))
				cur.Reset()
			}
		}
		for _, p := range series[db] {
			if !p.ok {
				flush()
				continue
			}
			lmax = max(lmax, p.lag)
			fmt.Fprintf(&cur, "%s,%s ", f1(x(p.t)), f1(y(p.lag)))
		}
		flush()
		l.Max = humanBytes(lmax)
		// Names in the gutter, one row each.
		l.LabelX, l.LabelY = "4", slTop+10+k*11
		c.Lines = append(c.Lines, l)
	}
	for _, ch := range changes {
		xx := f1(x(ch.t))
		c.HolderMarks = append(c.HolderMarks, slotMark{X: xx, Y1: fmt.Sprint(c.AxisY - 6), Y2: fmt.Sprint(c.AxisY),
			Title: Redact(fmt.Sprintf("%s: holder %s → %s at %s", ch.db, slotDash(ch.from), slotDash(ch.to), fmtT(ch.t)))})
	}
	c.H = c.TickY + 6
	c.H = max(c.H, slTop+10+len(order)*11+4)
	for _, f := range faults {
		title := fmt.Sprintf("%s %s %.3fs–%.3fs", f.Kind, f.Target, float64(f.Start)/1e9, float64(f.End)/1e9)
		w := x(f.End) - x(f.Start)
		c.Faults = append(c.Faults, ovFault{X: f1(x(f.Start)), W: f1(max(w, 1.5)), Title: Redact(title), Instant: f.Instant})
	}
	for i := 0; i <= 5; i++ {
		t := float64(tmax) * float64(i) / 5
		lx := ovGutter + pw*float64(i)/5
		label := fmtDur(t, tmax)
		if i == 5 {
			lx -= textWidth(label, ovLabelPx+1) + 2
		}
		c.Ticks = append(c.Ticks, ovTick{X: f1(lx), Label: label})
	}
	slices.SortStableFunc(c.Final, func(a, b slotFinal) int { return strings.Compare(a.DB, b.DB) })
	return c
}

func slotDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
