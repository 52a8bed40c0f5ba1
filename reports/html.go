package reports

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

//go:embed templates/report.html.tmpl
var reportTmplText string

//go:embed templates/report.css
var reportCSS string

//go:embed templates/report.js
var reportJS string

var reportTmpl = template.Must(template.New("report").Funcs(tmplFuncs).Parse(reportTmplText))

var tmplFuncs = template.FuncMap{
	"css":   func(s string) template.CSS { return template.CSS(s) },
	"js":    func(s string) template.JS { return template.JS(s) },
	"ms":    func(t int64) string { return strconv.FormatFloat(float64(t)/1e6, 'f', 1, 64) },
	"lower": strings.ToLower,
	"upper": func(s models.Status) string { return strings.ToUpper(string(s)) },
	"odd":   func(k int) bool { return k%2 == 1 },
}

// HTMLOptions configures WriteHTML. The zero value renders a report with no
// log links and a title made from the run.
type HTMLOptions struct {
	// RunDir is the run directory; its *.log files are linked by relative
	// name (report.html lives in the same directory). Empty: no log links.
	RunDir string
	// Title overrides the page title (default: "sagachaos <verdict> —
	// <target> <scenario> seed=<n>").
	Title string
	// MaxOpsPerOrder caps the ops embedded for one order (0: no cap). An
	// order whose ops were capped says so on the page, with the count left
	// out; nothing is dropped silently.
	MaxOpsPerOrder int
	// MaxEvidenceOps caps the ops rendered inline under one violation
	// (default 40); the rest are in the order's timeline and op table.
	MaxEvidenceOps int
}

// WriteHTML renders the self-contained report.html of one run: verdict and
// repro command on top, the checker table, every violation with its
// explanation, the ops that prove it and a per-order swimlane timeline (SVG,
// drawn in the browser from embedded JSON when the order is opened), an
// overall timeline of throughput, in-flight sagas and fault windows, an
// index of every order, and links to the process logs. No network: CSS, JS
// and data are inline. Every string taken from h, v or the run directory
// passes through Redact and html/template escaping; the embedded JSON has
// <, > and & escaped, so target data cannot close the script element.
// h may be nil (a run that produced no history): the report then shows the
// verdict alone.
func WriteHTML(w io.Writer, h *models.History, v models.Verdict, opts HTMLOptions) error {
	if h == nil {
		h = &models.History{}
	}
	if opts.MaxEvidenceOps <= 0 {
		opts.MaxEvidenceOps = 40
	}
	m, err := buildReport(h, v, opts)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	// The page is the data plus the inline CSS and script plus the markup;
	// one allocation, so a 14 MB page is never copied while it grows.
	buf.Grow(len(m.Data) + len(reportCSS) + len(reportJS) + 256<<10)
	if err := reportTmpl.Execute(&buf, m); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// reportModel is what the template sees.
type reportModel struct {
	Title      string
	Status     models.Status
	Error      string
	Interrupt  bool
	Truncated  bool
	Run        models.RunInfo
	Started    string
	Ops        int
	HistoryOps int
	Checkers   []checkerRow
	Groups     []violationGroup
	NViol      int
	Culprits   []culprit
	// CulpritsMore counts failing orders beyond the header's chips (all are
	// in the violation list and the order index).
	CulpritsMore int
	Logs         []logLink
	LogsErr      string
	Overall      overallTimeline
	Slots        slotChart
	Components   compSection
	Capped       int
	CSS          template.CSS
	JS           template.JS
	Data         template.JS
}

type checkerRow struct {
	// Status is the CSS status ("na" for not applicable), Label the text.
	Name, Status, Label, Unknown, Stats string
	Violations                          int
}

type violationGroup struct {
	Checker, Kind string
	Items         []violationView
}

type violationView struct {
	N        int
	Checker  string
	Kind     string
	Order    string
	Message  string
	Ops      []opView
	More     int
	OpsAttr  string // comma-separated indices, for the timeline
	Missing  []int64
	AutoOpen bool
	// Story is the generated narrative (narrative.go), one clause per fact.
	Story []clauseView
}

// clauseView is one clause of a narrative as the page links it.
type clauseView struct {
	Text string
	Ops  string // comma-separated op indices
	Refs []int64
	Href template.URL
}

type opView struct {
	I                           int64
	T                           string
	Proc, Type, F, Order, Value string
}

// maxCulprits bounds the failing-order chips in the header: the header must
// stay one glance; the page says how many more there are.
const maxCulprits = 24

type culprit struct {
	Order string
	Sigs  string
	Count int
}

type logLink struct {
	Name string
	Href template.URL
	Size string
}

func buildReport(h *models.History, v models.Verdict, opts HTMLOptions) (*reportModel, error) {
	m := &reportModel{
		Status:     v.Status,
		Error:      Redact(v.Error),
		Interrupt:  v.Interrupted,
		Truncated:  h.Truncated,
		Run:        redactRun(v.Run),
		Started:    Redact(h.Header.Started),
		Ops:        v.Ops,
		HistoryOps: len(h.Ops),
		CSS:        template.CSS(reportCSS),
		JS:         template.JS(reportJS),
	}
	if v.Error != "" && m.Status == "" {
		m.Status = "error"
	}
	m.Title = opts.Title
	if m.Title == "" {
		m.Title = fmt.Sprintf("sagachaos %s — %s", strings.ToUpper(string(m.Status)), runLabel(m.Run))
	}
	m.Title = Redact(m.Title)

	byIndex := func(i int64) (models.Op, bool) {
		if i < 0 || i >= int64(len(h.Ops)) || h.Ops[i].I != i {
			// Dense indices are the contract; fall back to a search if not.
			for _, op := range h.Ops {
				if op.I == i {
					return op, true
				}
			}
			return models.Op{}, false
		}
		return h.Ops[i], true
	}

	faults := faultWindows(h)
	comp := buildComponents(h, opts.RunDir)
	var started time.Time
	if ts, err := time.Parse(time.RFC3339Nano, h.Header.Started); err == nil {
		started = ts
	}
	comp.attachLogs(opts.RunDir, started)
	story := newNarrator(h, comp, faults, v)

	// Checkers and violations, grouped by signature (checker + kind).
	groupIdx := map[string]int{}
	orderSigs := map[string]map[string]bool{}
	orderCount := map[string]int{}
	var orderSeen []string
	n := 0
	for _, r := range v.Results {
		row := checkerRow{Name: Redact(r.Checker), Status: string(r.Status), Label: string(r.Status), Unknown: Redact(r.Unknown), Violations: len(r.Violations)}
		switch {
		case r.NotApplicable != "":
			// n/a, as the terminal shows it: the reason, not counters
			row.Status, row.Label, row.Stats = "na", "n/a", Redact("not applicable: "+r.NotApplicable)
		default:
			row.Stats = Redact(strings.TrimSpace(statsLine(r.Stats) + " " + rulesNALine(r.RulesNotApplicable, true)))
		}
		m.Checkers = append(m.Checkers, row)
		for _, vi := range r.Violations {
			checker := vi.Checker
			if checker == "" {
				checker = r.Checker
			}
			key := checker + "\x00" + vi.Kind
			gi, ok := groupIdx[key]
			if !ok {
				gi = len(m.Groups)
				groupIdx[key] = gi
				m.Groups = append(m.Groups, violationGroup{Checker: Redact(checker), Kind: Redact(vi.Kind)})
			}
			n++
			vv := violationView{N: n, Checker: Redact(checker), Kind: Redact(vi.Kind), Order: Redact(vi.Order), Message: Redact(vi.Message), AutoOpen: n <= 3}
			idx := make([]string, 0, len(vi.Ops))
			for k, i := range vi.Ops {
				idx = append(idx, strconv.FormatInt(i, 10))
				op, ok := byIndex(i)
				if !ok {
					vv.Missing = append(vv.Missing, i)
					continue
				}
				if k >= opts.MaxEvidenceOps {
					vv.More++
					continue
				}
				vv.Ops = append(vv.Ops, viewOp(op))
			}
			vv.OpsAttr = strings.Join(idx, ",")
			vv.Story = storyView(story.narrate(vi), vv, vi, comp, h)
			m.Groups[gi].Items = append(m.Groups[gi].Items, vv)
			if vi.Order != "" {
				o := Redact(vi.Order)
				if orderSigs[o] == nil {
					orderSigs[o] = map[string]bool{}
					orderSeen = append(orderSeen, o)
				}
				orderSigs[o][Redact(checker)+"/"+Redact(vi.Kind)] = true
				orderCount[o]++
			}
		}
	}
	m.NViol = n
	if len(orderSeen) > maxCulprits {
		m.CulpritsMore = len(orderSeen) - maxCulprits
		orderSeen = orderSeen[:maxCulprits]
	}
	for _, o := range orderSeen {
		sigs := make([]string, 0, len(orderSigs[o]))
		for s := range orderSigs[o] {
			sigs = append(sigs, s)
		}
		sort.Strings(sigs)
		m.Culprits = append(m.Culprits, culprit{Order: o, Sigs: strings.Join(sigs, ", "), Count: orderCount[o]})
	}

	// Process logs in the run directory.
	if opts.RunDir != "" {
		ents, err := os.ReadDir(opts.RunDir)
		if err != nil {
			m.LogsErr = Redact(fmt.Sprintf("cannot list logs: %v", err))
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".log") {
				continue
			}
			size := ""
			if fi, err := e.Info(); err == nil {
				size = humanBytes(fi.Size())
			}
			// "./" + path-escaped name: a relative link that works for any
			// file name (#, ?, spaces) and can never read as a scheme. Redacted
			// too: a broken link beats a leaked secret.
			m.Logs = append(m.Logs, logLink{Name: Redact(e.Name()), Href: template.URL("./" + url.PathEscape(Redact(e.Name()))), Size: size})
		}
	}

	data, capped, err := buildData(h, v, opts, faults, comp)
	if err != nil {
		return nil, err
	}
	m.Data = data
	m.Capped = capped
	m.Overall = buildOverall(h, faults, comp)
	m.Slots = buildSlotChart(h, faults)
	m.Components = buildCompSection(comp)
	return m, nil
}

// storyView links each clause: to its row in the violation's evidence
// table when the op is cited there, to the component event list for
// component events, to the order otherwise. The script also highlights
// the op in the timeline on click.
func storyView(cs []clause, vv violationView, vi models.Violation, comp *components, h *models.History) []clauseView {
	shown := map[int64]bool{}
	for _, o := range vv.Ops {
		shown[o.I] = true
	}
	out := make([]clauseView, 0, len(cs))
	for _, c := range cs {
		if len(c.Ops) == 0 {
			continue
		}
		cv := clauseView{Text: Redact(c.Text), Refs: c.Ops}
		ids := make([]string, len(c.Ops))
		for k, i := range c.Ops {
			ids[k] = strconv.FormatInt(i, 10)
		}
		cv.Ops = strings.Join(ids, ",")
		i := c.Ops[0]
		switch _, isMark := comp.markAt(i); {
		case shown[i]:
			cv.Href = template.URL(fmt.Sprintf("#v%d-op-%d", vv.N, i))
		case isMark:
			cv.Href = template.URL(fmt.Sprintf("#op-%d", i))
		case i >= 0 && i < int64(len(h.Ops)) && h.Ops[i].Proc == models.ProcNemesis:
			cv.Href = "#overall"
		case vi.Order != "":
			cv.Href = template.URL("#order-" + url.PathEscape(Redact(vi.Order)))
		}
		out = append(out, cv)
	}
	return out
}

func redactRun(r models.RunInfo) models.RunInfo {
	r.ID = Redact(r.ID)
	r.Target = Redact(r.Target)
	r.Mutant = Redact(r.Mutant)
	r.Scenario = Redact(r.Scenario)
	r.Repro = Redact(r.Repro)
	return r
}

func viewOp(op models.Op) opView {
	return opView{I: op.I, T: strconv.FormatFloat(float64(op.T)/1e6, 'f', 3, 64), Proc: Redact(op.Proc),
		Type: string(op.Type), F: Redact(op.F), Order: Redact(op.Order), Value: Redact(string(op.Value))}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// faultWindow is one nemesis fault as the timelines draw it: a shaded window
// from its start to its end op, or an instant marker.
type faultWindow struct {
	ID      string  `json:"id"`
	Kind    string  `json:"kind"`
	Target  string  `json:"target,omitempty"`
	Start   int64   `json:"s"`
	End     int64   `json:"e"`
	Instant bool    `json:"instant,omitempty"`
	Open    bool    `json:"open,omitempty"` // no end op: still active when the history ends
	Err     string  `json:"err,omitempty"`
	Ops     []int64 `json:"ops"`
}

// faultWindows pairs nemesis start/end ops by fault id. A start without an
// end stays open until the last op (drawn as such, and labelled open).
func faultWindows(h *models.History) []faultWindow {
	var out []faultWindow
	open := map[string]int{}
	var last int64
	for _, op := range h.Ops {
		last = max(last, op.T)
		if op.Proc != models.ProcNemesis {
			continue
		}
		var fr models.FaultRecord
		if err := op.Decode(&fr); err != nil {
			fr = models.FaultRecord{Kind: op.F, Phase: models.PhaseInstant, Error: "undecodable fault record"}
		}
		kind := fr.Kind
		if kind == "" {
			kind = op.F
		}
		id := fr.ID
		if id == "" {
			id = "op" + strconv.FormatInt(op.I, 10)
		}
		switch fr.Phase {
		case models.PhaseStart:
			open[id] = len(out)
			out = append(out, faultWindow{ID: Redact(id), Kind: Redact(kind), Target: Redact(fr.Target), Start: op.T, End: -1, Err: Redact(fr.Error), Ops: []int64{op.I}})
		case models.PhaseEnd:
			if k, ok := open[id]; ok {
				out[k].End = op.T
				out[k].Ops = append(out[k].Ops, op.I)
				if fr.Error != "" {
					out[k].Err = Redact(fr.Error)
				}
				delete(open, id)
				continue
			}
			// An end without a start: draw it as an instant.
			fallthrough
		default:
			if op.Type == models.Invoke {
				continue // the completion of a one-shot fault carries its record
			}
			out = append(out, faultWindow{ID: Redact(id), Kind: Redact(kind), Target: Redact(fr.Target), Start: op.T, End: op.T, Instant: true, Err: Redact(fr.Error), Ops: []int64{op.I}})
		}
	}
	for _, k := range open {
		out[k].End = last
		out[k].Open = true
	}
	return out
}

// reportData is the JSON the browser renders lazily. Ops are arrays
// [index, time µs, proc#, type#, f#, value] with strings interned, which
// keeps a 100k-op run's data a few MB.
type reportData struct {
	Procs   []string             `json:"procs"`
	Types   []string             `json:"types"`
	Fs      []string             `json:"fs"`
	Orders  []orderData          `json:"orders"`
	Loose   [][]any              `json:"loose"` // ops that violations cite but that belong to no order
	Faults  []faultWindow        `json:"faults"`
	Viol    map[string][][]int64 `json:"viol"` // order → the op sets of its violations
	ViolSig map[string][]string  `json:"violsig"`
	TMax    int64                `json:"tmax"`
	Comp    compData             `json:"comp"`
}

type orderData struct {
	ID     string  `json:"id"`
	Status string  `json:"status,omitempty"`
	Ops    [][]any `json:"ops"`
	Total  int     `json:"n"`
	Capped int     `json:"capped,omitempty"`
}

// addOrderOp appends op to its order's data, honouring the per-order cap.
func addOrderOp(d *reportData, orderPos map[string]int, op models.Op, opts HTMLOptions, capped *int, enc func(models.Op) []any) {
	id := Redact(op.Order)
	k, ok := orderPos[id]
	if !ok {
		k = len(d.Orders)
		orderPos[id] = k
		d.Orders = append(d.Orders, orderData{ID: id})
	}
	od := &d.Orders[k]
	od.Total++
	if op.Type == models.State && op.F == models.FOrderState {
		var st models.OrderState
		if op.Decode(&st) == nil {
			od.Status = Redact(st.Status)
		}
	}
	if opts.MaxOpsPerOrder > 0 && len(od.Ops) >= opts.MaxOpsPerOrder {
		if od.Capped == 0 {
			*capped++
		}
		od.Capped++
		return
	}
	od.Ops = append(od.Ops, enc(op))
}

func buildData(h *models.History, v models.Verdict, opts HTMLOptions, faults []faultWindow, comp *components) (template.JS, int, error) {
	// Empty, never null: the script iterates every list.
	d := reportData{Viol: map[string][][]int64{}, ViolSig: map[string][]string{},
		Procs: []string{}, Types: []string{}, Fs: []string{}, Orders: []orderData{}}
	intern := func(tab *[]string, idx map[string]int, s string) int {
		if k, ok := idx[s]; ok {
			return k
		}
		idx[s] = len(*tab)
		*tab = append(*tab, s)
		return idx[s]
	}
	procIdx, typeIdx, fIdx := map[string]int{}, map[string]int{}, map[string]int{}
	// A broker record is drawn when it entered the log (its broker
	// timestamp), not when the observer read it after quiescence.
	var started int64
	if h == nil {
		h = &models.History{}
	}
	if ts, err := time.Parse(time.RFC3339Nano, h.Header.Started); err == nil {
		started = ts.UnixNano()
	}
	opT := func(op models.Op) int64 {
		if op.Type == models.Event && started != 0 {
			var ev struct {
				TS int64 `json:"timestamp_ns"`
			}
			if json.Unmarshal(op.Value, &ev) == nil && ev.TS > started && ev.TS-started < op.T {
				return ev.TS - started
			}
		}
		return op.T
	}
	enc := func(op models.Op) []any {
		return []any{op.I, opT(op) / 1000,
			intern(&d.Procs, procIdx, Redact(op.Proc)),
			intern(&d.Types, typeIdx, string(op.Type)),
			intern(&d.Fs, fIdx, Redact(op.F)),
			Redact(string(op.Value))}
	}
	orderPos := map[string]int{}
	capped := 0
	// A client's invoke usually carries no order id (the server assigns it);
	// it belongs to the order its completion names, so hold it until then.
	pendingInvoke := map[string]models.Op{}
	for _, op := range h.Ops {
		d.TMax = max(d.TMax, op.T/1000)
		if strings.HasPrefix(op.Proc, models.ProcClientPfx) {
			if op.Type == models.Invoke && op.Order == "" {
				pendingInvoke[op.Proc] = op
				continue
			}
			if inv, ok := pendingInvoke[op.Proc]; ok && op.Type != models.Invoke {
				delete(pendingInvoke, op.Proc)
				if op.Order != "" {
					inv.Order = op.Order
					addOrderOp(&d, orderPos, inv, opts, &capped, enc)
				}
			}
		}
		if op.Order == "" {
			continue
		}
		addOrderOp(&d, orderPos, op, opts, &capped, enc)
	}
	looseSeen := map[int64]bool{}
	for _, r := range v.Results {
		for _, vi := range r.Violations {
			checker := vi.Checker
			if checker == "" {
				checker = r.Checker
			}
			o := Redact(vi.Order)
			ops := vi.Ops
			if ops == nil {
				ops = []int64{}
			}
			d.Viol[o] = append(d.Viol[o], ops)
			d.ViolSig[o] = append(d.ViolSig[o], Redact(checker)+"/"+Redact(vi.Kind))
			for _, i := range vi.Ops {
				if i < 0 || i >= int64(len(h.Ops)) || looseSeen[i] {
					continue
				}
				if op := h.Ops[i]; op.Order == "" || Redact(op.Order) != o {
					looseSeen[i] = true
					d.Loose = append(d.Loose, enc(op))
				}
			}
		}
	}
	if d.Loose == nil {
		d.Loose = [][]any{}
	}
	d.Faults = faults
	if d.Faults == nil {
		d.Faults = []faultWindow{}
	}
	d.Comp = compJSON(comp)
	// json.Marshal escapes <, > and & as \u003c…, and U+2028/2029, so the
	// result cannot end the <script> element it is embedded in.
	b, err := json.Marshal(d)
	if err != nil {
		return "", 0, fmt.Errorf("encode report data: %w", err)
	}
	return template.JS(b), capped, nil
}
