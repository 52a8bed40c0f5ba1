package reports

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// What the target's components did, as the lanes draw it: each instance's
// starts, health, exits, the failpoints it reached and fired, and the
// windows it was paused or down. Two sources, in order of preference:
//
//   - the component/<instance> ops (models/target.go): exact times,
//     incarnations, exit status, every failpoint line as it was written;
//   - for histories that predate them, the nemesis's crash / restart ops
//     and kill / rewind windows, and the run directory's failpoints.jsonl,
//     which has no times: a fired crash line is drawn at the crash op it
//     caused when the two lists pair up one to one, and every other line is
//     listed in order only, never placed on the time axis.
//
// Pause windows always come from the nemesis's pause faults. Every drawn
// mark names the history op it stands on (Op), so the narrative and the
// page can link to it.

// Mark kinds (also the CSS class suffix of a mark, cm-<kind>).
const (
	cmStart   = "start"   // an incarnation started
	cmHealthy = "healthy" // it answered its health check
	cmExit    = "exit"    // it exited because the harness or the nemesis stopped it
	cmCrash   = "crash"   // it exited by itself
	cmFired   = "fired"   // an armed failpoint fired in it
	cmReached = "reached" // it reached a failpoint for the first time in its life
)

// Span kinds.
const (
	csBoot   = "boot"   // started, not yet healthy
	csUp     = "up"     // healthy until it exited
	csDown   = "down"   // between an exit and the next start
	csPaused = "paused" // SIGSTOPped by the nemesis
)

// maxCompMarks bounds the marks embedded for the whole run; the page says
// how many were left out.
const maxCompMarks = 5000

type compMark struct {
	T         int64
	Inst      string
	Kind      string
	Label     string // short text drawn beside the mark
	Title     string // the tooltip: everything known about it
	Op        int64  // the history op it stands on
	Inc       int    // incarnation (1 = first start), 0 if unknown
	Failpoint string
	Action    string
	Hit       int
	Status    string // exit status
	Cause     string
	// Borrowed: the time is that of Op, a different record than the one
	// the mark comes from (a failpoints.jsonl line drawn at its crash).
	Borrowed bool
	Log      int // index into components.Logs, -1 for none
}

type compSpan struct {
	Inst string
	Kind string
	S, E int64
	Op   int64 // the op that opened it
	Open bool  // never closed in the history
}

type components struct {
	Lanes []string // instance names, in the target's declared order
	Marks []compMark
	Spans []compSpan
	// OrderOnly lists, per instance, the failpoints.jsonl lines that have
	// no time (older histories): shown in order, never on the axis.
	OrderOnly map[string][]string
	// FromOps says the lanes come from component ops (exact); otherwise
	// from nemesis ops and failpoints.jsonl (older histories).
	FromOps bool
	Dropped int // marks beyond maxCompMarks
	Logs    []logExcerpt
	// Relays are the instances the target declares as relays (empty for
	// a history without a target declaration).
	Relays []string
	byOp   map[int64]int // op index → mark index
}

// instanceOf says whether a nemesis target names a component instance
// (not a link "a→b", not a failpoint "relay.after-publish", not the
// database).
func instanceOf(kind, target string, known map[string]bool) bool {
	if target == "" || strings.Contains(target, "→") {
		return false
	}
	if known[target] {
		return true
	}
	switch kind {
	case "kill", "pause", "crash", "restart", "rewind":
		return true
	}
	return false
}

// buildComponents reads the component lanes from h and, for an older
// history, runDir's failpoints.jsonl. It never fails: what it cannot read
// it leaves out (and says so in OrderOnly or Dropped).
func buildComponents(h *models.History, runDir string) *components {
	c := &components{OrderOnly: map[string][]string{}, byOp: map[int64]int{}}
	known := map[string]bool{}
	var order []string
	addLane := func(inst string) {
		if inst != "" && !known[inst] {
			known[inst] = true
			order = append(order, inst)
		}
	}
	var tmax int64
	hasOps := map[string]bool{}
	inc := map[string]int{}       // current incarnation per instance (component ops)
	startT := map[string]int64{}  // time of the current incarnation's start
	startOp := map[string]int64{} // its op
	healthy := map[string]bool{}
	downAt := map[string]int{} // open down span per instance, index into Spans

	// Older histories: what the nemesis says happened to each instance.
	type nemEvent struct {
		op   models.Op
		fr   models.FaultRecord
		kind string
	}
	var nem []nemEvent
	pauseOpen := map[string]int{} // fault id → span index

	for _, op := range h.Ops {
		tmax = max(tmax, op.T)
		switch {
		case op.Proc == models.ProcHarness && op.F == models.FTarget:
			var d models.TargetDecl
			if op.Decode(&d) == nil {
				for _, in := range d.Instances {
					addLane(in)
				}
				c.Relays = append(c.Relays, d.Relays...)
			}
		case strings.HasPrefix(op.Proc, models.ProcComponentPrefix):
			inst := strings.TrimPrefix(op.Proc, models.ProcComponentPrefix)
			addLane(inst)
			hasOps[inst] = true
			c.FromOps = true
			switch op.F {
			case models.FComponentStart, models.FComponentHealthy, models.FComponentExit:
				var ev models.ComponentEvent
				if op.Decode(&ev) != nil {
					continue
				}
				if ev.Incarnation == 0 {
					ev.Incarnation = inc[inst]
					if op.F == models.FComponentStart {
						ev.Incarnation++
					}
				}
				m := compMark{T: op.T, Inst: inst, Op: op.I, Inc: ev.Incarnation, Status: ev.Status, Cause: ev.Cause}
				switch op.F {
				case models.FComponentStart:
					if k, ok := downAt[inst]; ok {
						c.Spans[k].E, c.Spans[k].Open = op.T, false
						delete(downAt, inst)
					}
					inc[inst] = ev.Incarnation
					startT[inst], startOp[inst] = op.T, op.I
					healthy[inst] = false
					m.Kind = cmStart
					m.Label = "start"
					if ev.Incarnation > 1 {
						m.Label = "restart"
					}
					m.Title = fmt.Sprintf("%s start #%d", inst, ev.Incarnation)
					if ev.Pid != 0 {
						m.Title += fmt.Sprintf(" (pid %d)", ev.Pid)
					}
					if ev.Cause != "" {
						m.Title += ", cause " + ev.Cause
					}
				case models.FComponentHealthy:
					m.Kind = cmHealthy
					m.Title = fmt.Sprintf("%s #%d healthy", inst, ev.Incarnation)
					if ev.WaitedMS > 0 {
						m.Title += fmt.Sprintf(" after %d ms", ev.WaitedMS)
					}
					if s, ok := startT[inst]; ok && !healthy[inst] {
						c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: csBoot, S: s, E: op.T, Op: startOp[inst]})
						startT[inst], startOp[inst] = op.T, op.I
					}
					healthy[inst] = true
				case models.FComponentExit:
					m.Kind = cmCrash
					m.Label = "crash"
					how := "exited by itself"
					if ev.Expected {
						m.Kind, m.Label, how = cmExit, "stopped", "was stopped"
						if strings.HasPrefix(ev.Cause, "fault:") {
							m.Label = "killed"
							how = "was killed by fault " + strings.TrimPrefix(ev.Cause, "fault:")
						}
					}
					m.Title = fmt.Sprintf("%s #%d %s", inst, ev.Incarnation, how)
					if ev.Status != "" {
						m.Title += " (" + ev.Status + ")"
					}
					if s, ok := startT[inst]; ok {
						kind := csBoot
						if healthy[inst] {
							kind = csUp
						}
						c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: kind, S: s, E: op.T, Op: startOp[inst]})
						delete(startT, inst)
					}
					downAt[inst] = len(c.Spans)
					c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: csDown, S: op.T, E: -1, Op: op.I, Open: true})
				}
				c.add(m)
			case models.FFailpoint:
				var fe models.FailpointEvent
				if op.Decode(&fe) != nil {
					continue
				}
				m := compMark{T: op.T, Inst: inst, Op: op.I, Inc: inc[inst], Failpoint: fe.Failpoint, Action: fe.Action, Hit: fe.Hit}
				if fe.Fired || fe.Action != "" {
					m.Kind = cmFired
					m.Label = fe.Failpoint
					m.Title = fmt.Sprintf("%s: failpoint %s fired (%s, hit %d)", inst, fe.Failpoint, orDash(fe.Action), fe.Hit)
				} else {
					m.Kind = cmReached
					m.Title = fmt.Sprintf("%s: reached failpoint %s for the first time in this process", inst, fe.Failpoint)
				}
				c.add(m)
			}
		case op.Proc == models.ProcNemesis:
			var fr models.FaultRecord
			if op.Decode(&fr) != nil {
				continue
			}
			kind := fr.Kind
			if kind == "" {
				kind = op.F
			}
			if !instanceOf(kind, fr.Target, known) {
				continue
			}
			if kind == "pause" && fr.Error == "" {
				switch fr.Phase {
				case models.PhaseStart:
					pauseOpen[fr.ID] = len(c.Spans)
					c.Spans = append(c.Spans, compSpan{Inst: fr.Target, Kind: csPaused, S: op.T, E: -1, Op: op.I, Open: true})
				case models.PhaseEnd:
					if k, ok := pauseOpen[fr.ID]; ok {
						c.Spans[k].E, c.Spans[k].Open = op.T, false
						delete(pauseOpen, fr.ID)
					}
				}
			}
			nem = append(nem, nemEvent{op: op, fr: fr, kind: kind})
		}
	}

	// Older histories: lifecycle from the nemesis, for instances that have
	// no component ops.
	crashes := map[string][]int{} // instance → mark indices of its crashes
	for _, e := range nem {
		inst := e.fr.Target
		if hasOps[inst] || e.fr.Error != "" {
			continue
		}
		addLane(inst)
		m := compMark{T: e.op.T, Inst: inst, Op: e.op.I}
		switch {
		case e.kind == "crash":
			m.Kind, m.Label = cmCrash, "crash"
			m.Status = e.fr.Detail["exit"]
			m.Title = inst + " exited by itself"
			if m.Status != "" {
				m.Title += " (" + m.Status + ")"
			}
			if a := e.fr.Detail["armed_failpoints"]; a != "" {
				m.Title += "; armed failpoints: " + a
			}
			downAt[inst] = len(c.Spans)
			c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: csDown, S: e.op.T, E: -1, Op: e.op.I, Open: true})
			crashes[inst] = append(crashes[inst], len(c.Marks))
		case e.kind == "restart" || ((e.kind == "kill" || e.kind == "rewind") && e.fr.Phase == models.PhaseEnd):
			m.Kind, m.Label = cmStart, "restart"
			m.Title = inst + " restarted"
			if e.kind != "restart" {
				m.Title += " by the nemesis (end of " + e.kind + " " + e.fr.ID + ")"
			}
			if k, ok := downAt[inst]; ok {
				c.Spans[k].E, c.Spans[k].Open = e.op.T, false
				delete(downAt, inst)
			}
		case (e.kind == "kill" || e.kind == "rewind") && e.fr.Phase != models.PhaseEnd:
			m.Kind, m.Label = cmExit, "killed"
			m.Cause = "fault:" + e.fr.ID
			m.Title = inst + " was killed by fault " + e.fr.ID + " (" + e.kind + ")"
			downAt[inst] = len(c.Spans)
			c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: csDown, S: e.op.T, E: -1, Op: e.op.I, Open: true})
		default:
			continue
		}
		c.add(m)
	}
	if !c.FromOps && runDir != "" {
		c.readFailpointsFile(filepath.Join(runDir, "failpoints.jsonl"), crashes, addLane)
	}
	for k := range c.Spans {
		if c.Spans[k].E < 0 {
			c.Spans[k].E = tmax
		}
	}
	// Close the up spans of incarnations still running at the end.
	for inst, s := range startT {
		kind := csBoot
		if healthy[inst] {
			kind = csUp
		}
		c.Spans = append(c.Spans, compSpan{Inst: inst, Kind: kind, S: s, E: tmax, Op: startOp[inst]})
	}
	sort.SliceStable(c.Marks, func(i, j int) bool { return c.Marks[i].T < c.Marks[j].T })
	c.pairFired()
	for k := range c.Marks {
		c.byOp[c.Marks[k].Op] = k
	}
	sort.SliceStable(c.Spans, func(i, j int) bool { return c.Spans[i].S < c.Spans[j].S })
	// Lanes: only instances with something to draw, in declared order.
	drawn := map[string]bool{}
	for _, m := range c.Marks {
		drawn[m.Inst] = true
	}
	for _, s := range c.Spans {
		drawn[s.Inst] = true
	}
	for inst := range c.OrderOnly {
		drawn[inst] = true
	}
	for _, inst := range order {
		if drawn[inst] {
			c.Lanes = append(c.Lanes, inst)
		}
	}
	return c
}

// pairFired gives a fired failpoint's name to the exit it caused (the
// nearest exit of the same instance within 100 ms, before or after), so the two draw as one
// label, "crash at relay.after-publish"; the fired mark keeps its tooltip.
func (c *components) pairFired() {
	const near = int64(100 * time.Millisecond)
	for k := range c.Marks {
		m := &c.Marks[k]
		if m.Kind != cmFired || m.Label == "" {
			continue
		}
		best := -1
		// The exit may come first: the harness reads the failpoint log of
		// a crashed process when it sees the exit.
		for j := k - 1; j >= 0 && m.T-c.Marks[j].T <= near; j-- {
			if e := c.Marks[j]; e.Inst == m.Inst && (e.Kind == cmCrash || e.Kind == cmExit) {
				best = j
				break
			}
		}
		for j := k + 1; best < 0 && j < len(c.Marks) && c.Marks[j].T-m.T <= near; j++ {
			if e := c.Marks[j]; e.Inst == m.Inst && (e.Kind == cmCrash || e.Kind == cmExit) {
				best = j
			}
		}
		if best < 0 {
			continue
		}
		e := &c.Marks[best]
		if e.Failpoint == "" {
			e.Failpoint, e.Hit, e.Action = m.Failpoint, m.Hit, m.Action
		}
		if !strings.Contains(e.Label, " at ") {
			e.Label += " at " + m.Failpoint
		}
		m.Label = ""
	}
}

func (c *components) add(m compMark) {
	if len(c.Marks) >= maxCompMarks {
		c.Dropped++
		return
	}
	m.Log = -1
	c.Marks = append(c.Marks, m)
}

// markAt returns the mark that stands on op i.
func (c *components) markAt(i int64) (compMark, bool) {
	if c == nil {
		return compMark{}, false
	}
	k, ok := c.byOp[i]
	if !ok {
		return compMark{}, false
	}
	return c.Marks[k], true
}

// readFailpointsFile pairs the fired crash lines of failpoints.jsonl with
// the crash ops of the same instance (one to one, in order, only when the
// counts agree) and keeps every other line as order-only.
func (c *components) readFailpointsFile(path string, crashes map[string][]int, addLane func(string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []models.FailpointEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && len(lines) < maxCompMarks {
		var fe models.FailpointEvent
		if json.Unmarshal(sc.Bytes(), &fe) != nil || fe.Instance == "" || fe.Failpoint == "" {
			continue
		}
		lines = append(lines, fe)
	}
	fired := map[string][]int{}
	for k, fe := range lines {
		if fe.Action == "crash" {
			fired[fe.Instance] = append(fired[fe.Instance], k)
		}
	}
	paired := map[int]bool{}
	for inst, ks := range fired {
		cr := crashes[inst]
		if len(cr) != len(ks) {
			continue
		}
		for n, k := range ks {
			fe := lines[k]
			cm := c.Marks[cr[n]]
			c.add(compMark{T: cm.T, Inst: inst, Kind: cmFired, Label: fe.Failpoint, Op: cm.Op, Failpoint: fe.Failpoint, Action: fe.Action, Hit: fe.Hit, Borrowed: true,
				Title: fmt.Sprintf("%s: failpoint %s fired (%s, hit %d) — from failpoints.jsonl, which has no times: drawn at the crash it caused (op #%d)", inst, fe.Failpoint, fe.Action, fe.Hit, cm.Op)})
			c.Marks[cr[n]].Failpoint = fe.Failpoint
			c.Marks[cr[n]].Hit = fe.Hit
			paired[k] = true
		}
	}
	for k, fe := range lines {
		if paired[k] {
			continue
		}
		addLane(fe.Instance)
		s := fe.Failpoint
		if fe.Action != "" {
			s += " " + fe.Action
		}
		if fe.Hit != 0 {
			s += " @" + strconv.Itoa(fe.Hit)
		}
		if fe.Action == "" && !fe.Fired { // a line with an action is a firing
			s += " (reached)"
		} else {
			s += " (fired)"
		}
		c.OrderOnly[fe.Instance] = append(c.OrderOnly[fe.Instance], s)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
