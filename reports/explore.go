package reports

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// ExplorePage is what explore.html shows of a `sagachaos explore`
// campaign: its settings, coverage and corpus growth over time (plotted),
// the corpus entries that added most, and the violations grouped by
// signature. The harness fills it from the campaign journal; this package
// only draws it.
type ExplorePage struct {
	Target, Mutant, Scenario string
	Seed                     uint64
	Budget, Elapsed          time.Duration
	// Stopped says why the campaign ended (violation, budget, runs,
	// interrupted).
	Stopped string
	// Started is the campaign's wall-clock start (RFC 3339).
	Started string
	Runs    []ExploreRun
	// Categories count the features reached, by category.
	Categories []ExploreCount
	// Top are the corpus entries, most features added first.
	Top        []ExploreEntry
	Violations []ExploreGroup
	// Note is a line shown under the header (how the times were taken).
	Note string
}

// ExploreRun is one candidate of the campaign.
type ExploreRun struct {
	N          int
	Name       string
	Origin     string
	Status     string
	Violations []string
	Err        string
	New        int
	Kept       bool
	Coverage   int
	Corpus     int
	AtSeconds  float64
	RunSeconds float64
	// Href links its run directory's report.html (relative to the page),
	// when the run directory was kept.
	Href string
}

// ExploreCount is one category of features and how many were reached.
type ExploreCount struct {
	Name  string
	Count int
}

// ExploreEntry is one corpus entry.
type ExploreEntry struct {
	Name, Origin, File string
	Added              int
	AtSeconds          float64
	// Sample are some of the features it reached first.
	Sample []string
	Href   string
}

// ExploreGroup is the violating runs of one signature.
type ExploreGroup struct {
	Signature string
	Runs      []string
	// Href links the first run's report; Replay replays it.
	Href, Replay string
}

type exploreModel struct {
	ExplorePage
	CSS                template.CSS
	Plot               template.HTML
	Title              string
	Kept, Errors, Invl int
	Features           int
	Rate               string
}

// WriteExplore renders explore.html: one self-contained file (inline CSS
// and SVG, no script, no network).
func WriteExplore(w io.Writer, p ExplorePage) error {
	m := exploreModel{ExplorePage: p, CSS: template.CSS(exploreCSS)}
	m.Title = "sagachaos explore — " + Redact(p.Target)
	if p.Mutant != "" {
		m.Title += " --mutant " + Redact(p.Mutant)
	}
	for i := range m.Runs {
		r := &m.Runs[i]
		r.Origin, r.Err = Redact(r.Origin), Redact(r.Err)
		if r.Kept {
			m.Kept++
		}
		if r.Err != "" {
			m.Errors++
		}
		if r.Status == "invalid" {
			m.Invl++
		}
		m.Features = max(m.Features, r.Coverage)
	}
	if mins := p.Elapsed.Minutes(); mins > 0 {
		m.Rate = fmt.Sprintf("%.1f runs/min", float64(len(p.Runs))/mins)
	}
	m.Plot = template.HTML(plotExplore(p))
	return exploreTmpl.Execute(w, m)
}

// plotExplore draws coverage (left axis) and corpus size (right axis)
// against campaign time, with a mark per violating run.
func plotExplore(p ExplorePage) string {
	const W, H, L, R, T, B = 760.0, 300.0, 56.0, 56.0, 16.0, 36.0
	pw, ph := W-L-R, H-T-B
	maxT := p.Elapsed.Seconds()
	maxC, maxK := 1, 1
	for _, r := range p.Runs {
		maxT = math.Max(maxT, r.AtSeconds)
		maxC, maxK = max(maxC, r.Coverage), max(maxK, r.Corpus)
	}
	if maxT <= 0 {
		maxT = 1
	}
	x := func(t float64) float64 { return L + pw*t/maxT }
	yc := func(c int) float64 { return T + ph - ph*float64(c)/float64(maxC) }
	yk := func(k int) float64 { return T + ph - ph*float64(k)/float64(maxK) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="coverage and corpus size over campaign time">`, W, H, W, H)
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="frame"/>`, L, T, pw, ph)
	for i := 0; i <= 4; i++ {
		c := maxC * i / 4
		y := yc(c)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="ax l">%d</text>`, L, L+pw, y, y, L-6, y+4, c)
		k := maxK * i / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="ax r">%d</text>`, L+pw+6, yk(k)+4, k)
		t := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="ax m">%s</text>`, x(t), T+ph+18, (time.Duration(t) * time.Second).String())
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="ax m">campaign time</text>`, L+pw/2, H-2)
	step := func(val func(ExploreRun) int, y func(int) float64, class string) {
		var pts []string
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(0), y(0)))
		last := 0
		for _, r := range p.Runs {
			v := val(r)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.AtSeconds), y(last)), fmt.Sprintf("%.1f,%.1f", x(r.AtSeconds), y(v)))
			last = v
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(maxT), y(last)))
		fmt.Fprintf(&b, `<polyline points="%s" class="%s"/>`, strings.Join(pts, " "), class)
	}
	step(func(r ExploreRun) int { return r.Corpus }, yk, "corpus")
	step(func(r ExploreRun) int { return r.Coverage }, yc, "coverage")
	for _, r := range p.Runs {
		switch {
		case r.Status == "invalid":
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="5" class="viol"><title>%s: %s</title></circle>`, x(r.AtSeconds), yc(r.Coverage), template.HTMLEscapeString(r.Name), template.HTMLEscapeString(strings.Join(r.Violations, ", ")))
		case r.Kept:
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" class="kept"><title>%s: +%d (%s)</title></circle>`, x(r.AtSeconds), yc(r.Coverage), template.HTMLEscapeString(r.Name), r.New, template.HTMLEscapeString(Redact(r.Origin)))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend coverage">— coverage (features, left)</text>`, L+8, T+14)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend corpus">— corpus (entries, right)</text>`, L+8, T+28)
	b.WriteString(`</svg>`)
	return b.String()
}

// SortTop orders corpus entries by features added, most first (then by
// name), and keeps n.
func SortTop(es []ExploreEntry, n int) []ExploreEntry {
	out := append([]ExploreEntry(nil), es...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Added != out[j].Added {
			return out[i].Added > out[j].Added
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

const exploreCSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.meta{color:#555} .note{color:#777;font-size:12px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f5f5f7;font-weight:600} td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,monospace;background:#f5f5f7;padding:1px 4px;border-radius:3px}
.invalid{color:#b00020;font-weight:600} .valid{color:#2e7d32} .unknown{color:#8a6d00} .err{color:#8a6d00}
.kpi{display:inline-block;margin:8px 16px 8px 0} .kpi b{font-size:20px;display:block}
svg .frame{fill:none;stroke:#ccc} svg .grid{stroke:#eee} svg .ax{font-size:11px;fill:#666}
svg .ax.l{text-anchor:end} svg .ax.m{text-anchor:middle}
svg polyline{fill:none;stroke-width:2} svg .coverage{stroke:#1565c0;fill:#1565c0} svg .corpus{stroke:#ef6c00;fill:#ef6c00}
svg polyline.coverage,svg polyline.corpus{fill:none} svg .legend{font-size:12px;stroke:none}
svg .kept{fill:#1565c0} svg .viol{fill:#b00020}
details summary{cursor:pointer} ul.f{margin:4px 0;padding-left:18px;font:12px ui-monospace,monospace}
`

var exploreTmpl = template.Must(template.New("explore").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title><style>{{.CSS}}</style></head>
<body>
<h1>{{.Title}}</h1>
<div class="meta">scenario <code>{{.Scenario}}</code> · campaign seed <code>{{.Seed}}</code> · budget {{.Budget}} · ran {{.Elapsed}} · stopped: <b>{{.Stopped}}</b>{{if .Started}} · started {{.Started}}{{end}}</div>
{{if .Note}}<div class="note">{{.Note}}</div>{{end}}
<div>
<span class="kpi"><b>{{len .Runs}}</b>runs{{if .Rate}} ({{.Rate}}){{end}}</span>
<span class="kpi"><b>{{.Kept}}</b>corpus entries</span>
<span class="kpi"><b>{{.Features}}</b>features reached</span>
<span class="kpi"><b>{{.Invl}}</b>violating runs</span>
{{if .Errors}}<span class="kpi"><b>{{.Errors}}</b>runs without a verdict</span>{{end}}
</div>

<h2>Coverage growth</h2>
{{.Plot}}
<table style="width:auto;margin-top:8px"><tr><th>feature category</th><th>reached</th></tr>
{{range .Categories}}<tr><td><code>{{.Name}}</code></td><td class="n">{{.Count}}</td></tr>{{end}}
</table>

{{if .Violations}}<h2>Violations, by signature</h2>
<table><tr><th>signature</th><th>runs</th><th>replay the first</th></tr>
{{range .Violations}}<tr><td class="invalid">{{.Signature}}</td><td>{{if .Href}}<a href="{{.Href}}">{{index .Runs 0}}</a>{{else}}{{index .Runs 0}}{{end}}{{range $i, $r := .Runs}}{{if $i}}, {{$r}}{{end}}{{end}}</td><td><code>{{.Replay}}</code></td></tr>{{end}}
</table>{{end}}

<h2>Corpus entries that added most</h2>
<table><tr><th>entry</th><th>added</th><th>at</th><th>origin</th><th>first reached (sample)</th></tr>
{{range .Top}}<tr><td>{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}{{.Name}}{{end}}</td><td class="n">+{{.Added}}</td><td class="n">{{printf "%.0fs" .AtSeconds}}</td><td>{{.Origin}}</td>
<td><details><summary>{{len .Sample}} shown</summary><ul class="f">{{range .Sample}}<li>{{.}}</li>{{end}}</ul></details></td></tr>{{end}}
</table>

<h2>Every run</h2>
<table><tr><th>#</th><th>run</th><th>verdict</th><th>new</th><th>coverage</th><th>corpus</th><th>at</th><th>took</th><th>origin</th></tr>
{{range .Runs}}<tr><td class="n">{{.N}}</td><td>{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}{{.Name}}{{end}}</td>
<td>{{if .Err}}<span class="err" title="{{.Err}}">no verdict</span>{{else}}<span class="{{.Status}}">{{.Status}}</span>{{range .Violations}} <code>{{.}}</code>{{end}}{{end}}</td>
<td class="n">{{if .New}}+{{.New}}{{end}}{{if .Kept}} ★{{end}}</td><td class="n">{{.Coverage}}</td><td class="n">{{.Corpus}}</td>
<td class="n">{{printf "%.0fs" .AtSeconds}}</td><td class="n">{{printf "%.1fs" .RunSeconds}}</td><td>{{.Origin}}</td></tr>{{end}}
</table>
</body></html>
`))
