package reports

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

//go:embed templates/index.html.tmpl
var indexTmplText string

var indexTmpl = template.Must(template.New("index").Funcs(tmplFuncs).Parse(indexTmplText))

// RunSummary is one run as the merged index sees it. Dir is the run
// directory relative to where index.html is written (links point at
// Dir/report.html).
type RunSummary struct {
	Dir     string
	Verdict models.Verdict
	// Summarized says the run directory was not kept (run --keep failing
	// removes valid ones and keeps their verdict in the store's
	// summary.jsonl): the index lists the run without a link.
	Summarized bool
	// Elapsed is the run's wall time when the summary says (0: unknown).
	Elapsed time.Duration
}

type indexModel struct {
	CSS                                     template.CSS
	Runs                                    []indexRun // non-valid runs, then valid ones
	NotValid                                []indexRun
	Valid                                   []indexRun
	Groups                                  []sigGroup
	Campaigns                               []campaign
	Total, NValid, NInvalid, NUnknown, NErr int
	NSummarized                             int
	StripH                                  int
}

type indexRun struct {
	Link, Dir, Status, Target, Mutant, Scenario, Seed, Repro, First, Elapsed string
	Ops, Violations                                                          int
	seed                                                                     uint64
	camp                                                                     int
	pos                                                                      int // position on its campaign's strip
	sigs                                                                     map[string]bool
}

type sigGroup struct {
	Checker, Kind, Example, ExampleOrder string
	Runs, Violations                     int
	Seeds                                []indexRun
	// SeedText is the seeds that hit it, per campaign, as ranges.
	SeedText []string
	// Strips: for each campaign it appears in, the sweep's strip with the
	// runs that hit this signature marked.
	Strips []sigStrip
	// Shown are the first linked runs; the rest are in a closed list.
	Shown, Rest []indexRun
	key         string
}

// A campaign is the runs of one target, mutant and scenario: the sweep's
// seeds, drawn as one strip, seed on x, verdict as colour.
type campaign struct {
	Label         string
	N             int
	SeedText      string
	Counts        string
	Cells         []stripCell
	Ticks         []stripTick
	W, H, StripH  int
	runs          []int
	first, lastSd uint64
}

type stripCell struct {
	X, W, Status, Title string
	Link                string
}

type stripTick struct {
	X, Label string
}

type sigStrip struct {
	Label  string
	W, H   int
	Cells  []stripCell // every run of the campaign, hit or not
	NHit   int
	NTotal int
}

const (
	stripW     = 1000
	stripH     = 18
	sigStripH  = 10
	maxShownSd = 40
)

// WriteIndex writes the merged index.html over many runs (seeds, shards,
// a sweep's summary): totals; a strip per campaign (target, mutant,
// scenario) with one cell per run, seed on x and verdict as colour;
// violations grouped by signature (checker + kind), each with the seeds
// that hit it as ranges, its own strip and the runs linked; the non-valid
// runs, and the valid ones in a closed list. It stays one screen of
// summary at a thousand runs. Strings pass through Redact and
// html/template.
func WriteIndex(w io.Writer, runs []RunSummary) error {
	m := indexModel{CSS: template.CSS(reportCSS), Total: len(runs), StripH: stripH}
	sorted := append([]RunSummary(nil), runs...)
	rank := map[models.Status]int{models.Invalid: 0, models.Unknown: 1, models.Valid: 2}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Verdict, sorted[j].Verdict
		ra, rb := statusRank(a, rank), statusRank(b, rank)
		if ra != rb {
			return ra < rb
		}
		if a.Run.Scenario != b.Run.Scenario {
			return a.Run.Scenario < b.Run.Scenario
		}
		return a.Run.Seed < b.Run.Seed
	})
	groupIdx := map[string]int{}
	campIdx := map[string]int{}
	groupRuns := map[int][]int{} // group → indices into m.Runs
	for _, rs := range sorted {
		v := rs.Verdict
		st := string(v.Status)
		if v.Error != "" {
			st = "error"
		}
		switch {
		case v.Error != "":
			m.NErr++
		case v.Status == models.Valid:
			m.NValid++
		case v.Status == models.Invalid:
			m.NInvalid++
		default:
			m.NUnknown++
		}
		link := path.Join(filepath.ToSlash(rs.Dir), ReportFile)
		if rs.Summarized {
			link = ""
			m.NSummarized++
		}
		ir := indexRun{Link: link, Dir: Redact(rs.Dir), Status: st,
			Target: Redact(v.Run.Target), Mutant: Redact(v.Run.Mutant), Scenario: Redact(v.Run.Scenario),
			Seed: strconv.FormatUint(v.Run.Seed, 10), Repro: Redact(v.Run.Repro), Ops: v.Ops, seed: v.Run.Seed, sigs: map[string]bool{}}
		if rs.Elapsed > 0 {
			ir.Elapsed = rs.Elapsed.Round(10 * time.Millisecond).String()
		}
		ck := v.Run.Target + "\x00" + v.Run.Mutant + "\x00" + v.Run.Scenario
		ci, ok := campIdx[ck]
		if !ok {
			ci = len(m.Campaigns)
			campIdx[ck] = ci
			label := ir.Target
			if ir.Mutant != "" {
				label += " mutant=" + ir.Mutant
			}
			m.Campaigns = append(m.Campaigns, campaign{Label: label + " · scenario " + ir.Scenario})
		}
		ir.camp = ci
		k := len(m.Runs)
		for _, r := range v.Results {
			for _, vi := range r.Violations {
				ir.Violations++
				checker := vi.Checker
				if checker == "" {
					checker = r.Checker
				}
				if ir.First == "" {
					ir.First = Redact(checker + "/" + vi.Kind)
				}
				key := checker + "\x00" + vi.Kind
				gi, ok := groupIdx[key]
				if !ok {
					gi = len(m.Groups)
					groupIdx[key] = gi
					m.Groups = append(m.Groups, sigGroup{Checker: Redact(checker), Kind: Redact(vi.Kind),
						Example: Redact(vi.Message), ExampleOrder: Redact(vi.Order), key: key})
				}
				m.Groups[gi].Violations++
				if !ir.sigs[key] {
					ir.sigs[key] = true
					m.Groups[gi].Runs++
					groupRuns[gi] = append(groupRuns[gi], k)
				}
			}
		}
		m.Campaigns[ci].runs = append(m.Campaigns[ci].runs, k)
		m.Runs = append(m.Runs, ir)
	}
	for _, r := range m.Runs {
		if r.Status == string(models.Valid) {
			m.Valid = append(m.Valid, r)
		} else {
			m.NotValid = append(m.NotValid, r)
		}
	}
	// Campaign strips: runs by seed.
	for ci := range m.Campaigns {
		c := &m.Campaigns[ci]
		sort.SliceStable(c.runs, func(a, b int) bool { return m.Runs[c.runs[a]].seed < m.Runs[c.runs[b]].seed })
		c.N, c.W, c.StripH, c.H = len(c.runs), stripW, stripH, stripH+16
		counts := map[string]int{}
		seeds := make([]uint64, 0, len(c.runs))
		for p, k := range c.runs {
			m.Runs[k].pos = p
			r := m.Runs[k]
			counts[r.Status]++
			seeds = append(seeds, r.seed)
			c.Cells = append(c.Cells, m.cell(r, p, c.N, ""))
		}
		c.SeedText = seedRanges(seeds)
		var parts []string
		for _, s := range []string{"invalid", "unknown", "error", "valid"} {
			if counts[s] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
			}
		}
		c.Counts = strings.Join(parts, ", ")
		c.Ticks = stripTicks(m.Runs, c.runs)
	}
	// Signatures: seeds as ranges, a strip per campaign, the runs linked.
	for gi := range m.Groups {
		g := &m.Groups[gi]
		byCamp := map[int][]int{}
		var camps []int
		for _, k := range groupRuns[gi] {
			r := m.Runs[k]
			if _, ok := byCamp[r.camp]; !ok {
				camps = append(camps, r.camp)
			}
			byCamp[r.camp] = append(byCamp[r.camp], k)
			g.Seeds = append(g.Seeds, r)
		}
		sort.Ints(camps)
		key := g.key
		for _, ci := range camps {
			c := m.Campaigns[ci]
			var seeds []uint64
			for _, k := range byCamp[ci] {
				seeds = append(seeds, m.Runs[k].seed)
			}
			sort.Slice(seeds, func(a, b int) bool { return seeds[a] < seeds[b] })
			g.SeedText = append(g.SeedText, c.Label+": seeds "+seedRanges(seeds))
			st := sigStrip{Label: c.Label, W: stripW, H: sigStripH, NHit: len(seeds), NTotal: c.N}
			for p, k := range c.runs {
				r := m.Runs[k]
				if r.sigs[key] {
					st.Cells = append(st.Cells, m.cell(r, p, c.N, "hit"))
				}
			}
			g.Strips = append(g.Strips, st)
		}
		sort.SliceStable(g.Seeds, func(a, b int) bool { return g.Seeds[a].seed < g.Seeds[b].seed })
		if len(g.Seeds) > maxShownSd {
			g.Shown, g.Rest = g.Seeds[:maxShownSd], g.Seeds[maxShownSd:]
		} else {
			g.Shown = g.Seeds
		}
	}
	sort.SliceStable(m.Groups, func(i, j int) bool { return m.Groups[i].Runs > m.Groups[j].Runs })
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, m); err != nil {
		return fmt.Errorf("render index: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// cell is run r at position p of n on a strip.
func (m *indexModel) cell(r indexRun, p, n int, status string) stripCell {
	w := float64(stripW) / float64(max(n, 1))
	gap := 0.0
	if w >= 4 {
		gap = 1
	}
	if status == "" {
		status = r.Status
	}
	title := fmt.Sprintf("seed %s: %s", r.Seed, r.Status)
	if r.First != "" {
		title += " — " + r.First
		if r.Violations > 1 {
			title += fmt.Sprintf(" (%d violations)", r.Violations)
		}
	}
	if r.Link == "" {
		title += " (summarised, directory not kept)"
	}
	return stripCell{X: f1(float64(p) * w), W: f1(max(w-gap, 0.6)), Status: status, Title: title, Link: r.Link}
}

// stripTicks labels a strip with the seeds at up to six evenly spaced
// positions.
func stripTicks(runs []indexRun, order []int) []stripTick {
	n := len(order)
	if n == 0 {
		return nil
	}
	w := float64(stripW) / float64(n)
	var out []stripTick
	last := -1
	for k := 0; k <= 5; k++ {
		p := int(float64(n-1) * float64(k) / 5)
		if p == last {
			continue
		}
		last = p
		label := runs[order[p]].Seed
		x := float64(p)*w + w/2 - textWidth(label, 10)/2
		x = min(max(x, 0), stripW-textWidth(label, 10))
		if len(out) > 0 {
			prev := out[len(out)-1]
			px, _ := strconv.ParseFloat(prev.X, 64)
			if x < px+textWidth(prev.Label, 10)+8 {
				continue
			}
		}
		out = append(out, stripTick{X: f1(x), Label: label})
	}
	return out
}

// seedRanges writes sorted seeds as "1–3, 7, 9–12".
func seedRanges(seeds []uint64) string {
	s := append([]uint64(nil), seeds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.FormatUint(s[i], 10))
		} else {
			parts = append(parts, strconv.FormatUint(s[i], 10)+"–"+strconv.FormatUint(s[j], 10))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func statusRank(v models.Verdict, rank map[models.Status]int) int {
	if v.Error != "" {
		return -1
	}
	if r, ok := rank[v.Status]; ok {
		return r
	}
	return 1
}

// ReadSummaryFile reads a sweep's summary.jsonl (models.RunRecord per
// line): every run, kept or not, with Dir resolved against the file's
// directory. A cut last line (a sweep killed mid-write) is dropped; any
// other bad line is an error naming it.
func ReadSummaryFile(file string) ([]RunSummary, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	base := filepath.Dir(file)
	var out []RunSummary
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	line := 0
	var bad error
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec models.RunRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			bad = fmt.Errorf("%s line %d: %w", file, line, err)
			continue
		}
		if rec.Verdict.Version > models.VerdictVersion {
			return nil, fmt.Errorf("%s line %d: verdict version %d is newer than this sagachaos reads (%d)", file, line, rec.Verdict.Version, models.VerdictVersion)
		}
		dir := rec.Dir
		if dir != "" && !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
		out = append(out, RunSummary{Dir: dir, Verdict: rec.Verdict, Summarized: !rec.Kept, Elapsed: time.Duration(rec.DurationMS) * time.Millisecond})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// MergeRuns joins runs read from run directories with runs read from
// summaries: a run listed in both (a kept run) is counted once, with the
// directory's verdict (it may have been re-checked since); its elapsed
// time comes from the summary.
func MergeRuns(dirs, summaries []RunSummary) []RunSummary {
	seen := map[string]int{}
	out := make([]RunSummary, 0, len(dirs)+len(summaries))
	for _, r := range dirs {
		seen[filepath.Clean(r.Dir)] = len(out)
		out = append(out, r)
	}
	for _, r := range summaries {
		if k, ok := seen[filepath.Clean(r.Dir)]; ok && r.Dir != "" {
			if out[k].Elapsed == 0 {
				out[k].Elapsed = r.Elapsed
			}
			continue
		}
		if !r.Summarized {
			// Said to be kept, but no such directory was found.
			if _, err := os.Stat(filepath.Join(r.Dir, VerdictFile)); errors.Is(err, os.ErrNotExist) {
				r.Summarized = true
			}
		}
		out = append(out, r)
	}
	return out
}
