package reports

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// Label layout for the SVG charts drawn in Go (the whole-run chart); the
// script does the same for the timelines it draws, with measured widths.
// A label goes into the first row where it does not touch the one before
// it; a label with a limit (the next mark on its lane) is shortened to fit
// with an ellipsis; a label that fits nowhere is not drawn, and its mark
// keeps the full text as a tooltip. The script's last pass measures every
// drawn label in the page and hides any that still intersect another, so
// an estimate that is off can cost a label, never an overlap.

// monoAdvance is the advance of one narrow glyph of the monospace fonts
// the page asks for, in em: 0.6 for DejaVu Sans Mono, Menlo, Consolas,
// Liberation Mono; a little more for safety.
const monoAdvance = 0.62

// textWidth estimates the drawn width of s at font size px in a monospace
// font; East Asian wide characters and emoji count double.
func textWidth(s string, px float64) float64 {
	n := 0.0
	for _, r := range s {
		n++
		if isWide(r) {
			n++
		}
	}
	return n * monoAdvance * px
}

func isWide(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hangul, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || (r >= 0xFF00 && r <= 0xFF60) || (r >= 0x1F000 && r <= 0x1FAFF) || (r >= 0x2E80 && r <= 0x303E))
}

type labelReq struct {
	X     float64 // left edge wanted
	Text  string
	Limit float64 // right edge it must not pass (0: none)
	// Short is a shorter text to use before eliding Text ("crash" for
	// "crash at relay.after-publish").
	Short string
	// Mark is the x of the mark the label belongs to (0: none): a label
	// that would run off the right edge goes to the mark's left instead.
	Mark float64
}

type labelPos struct {
	Row  int // -1: not drawn
	Text string
	X    float64
}

// layoutRows places labels (in any order) into up to rows rows between
// left and right.
func layoutRows(reqs []labelReq, rows int, px, gap, left, right float64) []labelPos {
	out := make([]labelPos, len(reqs))
	idx := make([]int, len(reqs))
	for k := range idx {
		idx[k] = k
	}
	sort.SliceStable(idx, func(a, b int) bool { return reqs[idx[a]].X < reqs[idx[b]].X })
	end := make([]float64, rows)
	for r := range end {
		end[r] = left - gap - 1
	}
	for _, k := range idx {
		q := reqs[k]
		out[k] = labelPos{Row: -1}
		text := q.Text
		if text == "" {
			continue
		}
		x0 := max(q.X, left)
		limit := right
		if q.Limit > 0 {
			limit = min(limit, q.Limit)
		}
		w := textWidth(text, px)
		if x0+w > right {
			if q.Mark > 0 {
				x0 = max(left, q.Mark-(q.X-q.Mark)-w) // to the mark's left
			} else if q.Limit == 0 {
				x0 = max(left, right-w) // slide left from the right edge
			}
		}
		if x0+w > limit && q.Short != "" && x0+textWidth(q.Short, px) <= limit {
			text = q.Short
			w = textWidth(text, px)
		}
		if x0+w > limit {
			text = elide(text, limit-x0, px)
			if text == "" {
				continue
			}
			w = textWidth(text, px)
		}
		for r := 0; r < rows; r++ {
			if end[r]+gap <= x0 {
				end[r] = x0 + w
				out[k] = labelPos{Row: r, Text: text, X: x0}
				break
			}
		}
	}
	return out
}

// elide shortens s to fit width w with a trailing ellipsis; "" if not even
// three characters fit.
func elide(s string, w, px float64) string {
	if textWidth(s, px) <= w {
		return s
	}
	rs := []rune(s)
	for n := len(rs) - 1; n >= 3; n-- {
		t := string(rs[:n]) + "…"
		if textWidth(t, px) <= w {
			return t
		}
	}
	return ""
}

// clipWidth shortens s (with an ellipsis) to at most w.
func clipWidth(s string, w, px float64) string {
	if t := elide(s, w, px); t != "" {
		return t
	}
	if utf8.RuneCountInString(s) > 0 {
		return string([]rune(s)[:1]) + "…"
	}
	return s
}
