package reports

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Linking a component mark to the log line around it. The supervisor
// appends every incarnation of an instance to <instance>.log in the run
// directory, each after a marker line
//
//	=== sagachaos: start #N at <RFC3339 time>: <command> ===
//
// so the k-th marker opens the k-th incarnation. Within an incarnation a
// mark is matched to a line by what it is: a start to its marker; a
// failpoint to the line that names the failpoint; an exit to the last line
// the incarnation wrote; anything else to the last line written at or
// before the mark's time (times read from the line when it carries one:
// JSON "time", logfmt time=, or a leading RFC 3339 stamp; a line without
// one inherits its predecessor's). The page embeds a few lines around each
// matched line (numbered as in the file) and links the whole file.

// logExcerpt is the lines around one matched log line.
type logExcerpt struct {
	Inst  string
	File  string // display name (redacted)
	Href  string // relative link to the whole file
	Line  int    // the matched line, 1-based
	From  int    // line number of Lines[0]
	Lines []string
	Why   string // how the line was chosen
	Total int    // lines indexed in the file
	Cut   bool   // the file was larger than the index bound
}

const (
	logContext     = 3       // lines shown either side of the matched one
	maxLogExcerpts = 600     // per report
	maxLogLines    = 4 << 20 // lines indexed per file
	maxLogBytes    = 1 << 30 // bytes indexed per file
	maxLogLineShow = 300     // bytes of one line shown
	maxMentions    = 1 << 12 // lines remembered per failpoint name
	markerPrefix   = "=== sagachaos: start #"
)

type logIndex struct {
	off      []int64
	t        []int64 // ns since the history's start; noTime before the first timed line
	inc      []int32 // incarnation, 1-based; 0 before the first marker
	markers  []int   // line index of each marker
	mentions map[string][]int
	end      int64
	cut      bool
}

const noTime = -1 << 62

// indexLog reads a log once, remembering for each line its offset, time
// and incarnation, and which lines name one of the given failpoints.
func indexLog(r io.Reader, started time.Time, names []string) (*logIndex, error) {
	ix := &logIndex{mentions: map[string][]int{}}
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	last := int64(noTime)
	inc := int32(0)
	for {
		if len(ix.off) >= maxLogLines || off >= maxLogBytes {
			if _, err := br.Peek(1); err == nil {
				ix.cut = true
			}
			break
		}
		line, n, err := readLine(br)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return ix, err
		}
		k := len(ix.off)
		if bytes.HasPrefix(line, []byte(markerPrefix)) {
			inc++
			ix.markers = append(ix.markers, k)
		}
		if t, ok := lineTime(line); ok && !started.IsZero() {
			last = t.Sub(started).Nanoseconds()
		}
		ix.off = append(ix.off, off)
		ix.t = append(ix.t, last)
		ix.inc = append(ix.inc, inc)
		for _, name := range names {
			if len(ix.mentions[name]) < maxMentions && bytes.Contains(line, []byte(name)) {
				ix.mentions[name] = append(ix.mentions[name], k)
			}
		}
		off += int64(n)
		if err != nil {
			break
		}
	}
	ix.end = off
	return ix, nil
}

// readLine returns one line without its newline (at most the reader's
// buffer of it: the rest of a longer line is consumed, not kept) and the
// number of bytes it took in the file.
func readLine(br *bufio.Reader) ([]byte, int, error) {
	line, err := br.ReadSlice('\n')
	n := len(line)
	keep := line
	for errors.Is(err, bufio.ErrBufferFull) {
		keep = append([]byte(nil), keep...)
		var more []byte
		more, err = br.ReadSlice('\n')
		n += len(more)
	}
	return bytes.TrimRight(keep, "\r\n"), n, err
}

// lineTime finds the wall time a log line was written at, if it says.
func lineTime(line []byte) (time.Time, bool) {
	if bytes.HasPrefix(line, []byte(markerPrefix)) {
		rest := line[len(markerPrefix):]
		if i := bytes.Index(rest, []byte(" at ")); i >= 0 {
			rest = rest[i+4:]
			if j := bytes.IndexByte(rest, ' '); j > 0 {
				return parseStamp(bytes.TrimSuffix(rest[:j], []byte(":")))
			}
		}
		return time.Time{}, false
	}
	head := line[:min(len(line), 256)]
	if len(head) > 0 && head[0] == '{' {
		for _, key := range []string{`"time":"`, `"ts":"`, `"timestamp":"`, `"@timestamp":"`} {
			if i := bytes.Index(head, []byte(key)); i >= 0 {
				v := head[i+len(key):]
				if j := bytes.IndexByte(v, '"'); j > 0 {
					return parseStamp(v[:j])
				}
			}
		}
		return time.Time{}, false
	}
	if bytes.HasPrefix(head, []byte("time=")) {
		v := bytes.TrimPrefix(head, []byte("time="))
		v = bytes.TrimPrefix(v, []byte(`"`))
		if j := bytes.IndexAny(v, "\" "); j > 0 {
			v = v[:j]
		}
		return parseStamp(v)
	}
	if len(head) >= 20 && head[0] >= '0' && head[0] <= '9' && head[4] == '-' {
		v := head
		if j := bytes.IndexByte(v, ' '); j > 0 {
			v = v[:j]
		}
		return parseStamp(v)
	}
	return time.Time{}, false
}

func parseStamp(b []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// segment is the line range [a, b) of incarnation k (whole file if the
// log has no marker for it).
func (ix *logIndex) segment(k int) (int, int, bool) {
	if k < 1 || k > len(ix.markers) {
		return 0, len(ix.off), false
	}
	a := ix.markers[k-1]
	b := len(ix.off)
	if k < len(ix.markers) {
		b = ix.markers[k]
	}
	return a, b, true
}

// atOrBefore is the last line in [a, b) written at or before t, or a.
func (ix *logIndex) atOrBefore(a, b int, t int64) (int, bool) {
	n := sort.Search(b-a, func(i int) bool { return ix.t[a+i] > t })
	if n == 0 || ix.t[a+n-1] == noTime {
		return a, false
	}
	return a + n - 1, true
}

// match picks the line a mark stands for and says why.
func (ix *logIndex) match(m compMark) (int, string) {
	if len(ix.off) == 0 {
		return -1, ""
	}
	a, b, ok := ix.segment(m.Inc)
	incName := fmt.Sprintf("incarnation %d", m.Inc)
	if !ok {
		incName = "the log"
	}
	// mention: the line of the segment naming the failpoint — the last one
	// (last), or the last one written by the mark's time, else the first.
	mention := func(last bool) (int, bool) {
		best, first := -1, -1
		for _, k := range ix.mentions[m.Failpoint] {
			if k < a || k >= b {
				continue
			}
			if first < 0 {
				first = k
			}
			if last || ix.t[k] == noTime || ix.t[k] <= m.T+int64(50*time.Millisecond) {
				best = k
			}
		}
		if best < 0 {
			best = first
		}
		return best, best >= 0
	}
	switch m.Kind {
	case cmStart:
		if ok {
			return a, fmt.Sprintf("start marker #%d", m.Inc)
		}
	case cmCrash, cmExit:
		if m.Failpoint != "" {
			if k, ok := mention(true); ok {
				return k, "last line of " + incName + " naming " + m.Failpoint
			}
		}
		if ok {
			return b - 1, "last line " + incName + " wrote"
		}
	case cmFired, cmReached:
		if k, ok := mention(false); ok {
			return k, "line of " + incName + " naming " + m.Failpoint
		}
		if m.Kind == cmFired && m.Action == "crash" && ok {
			return b - 1, "last line " + incName + " wrote (the log does not name the failpoint)"
		}
	}
	if k, timed := ix.atOrBefore(a, b, m.T); timed {
		return k, "last line of " + incName + " written at or before the mark"
	}
	return a, "first line of " + incName + " (its lines carry no time)"
}

// excerpt reads the lines around k.
func (ix *logIndex) excerpt(f io.ReaderAt, k int) ([]string, int) {
	from := max(0, k-logContext)
	to := min(len(ix.off), k+logContext+1)
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		end := ix.end
		if i+1 < len(ix.off) {
			end = ix.off[i+1]
		}
		n := min(end-ix.off[i], maxLogLineShow+1)
		buf := make([]byte, n)
		got, _ := f.ReadAt(buf, ix.off[i])
		buf = bytes.TrimRight(buf[:got], "\r\n")
		s := strings.ToValidUTF8(string(buf), "\uFFFD")
		if end-ix.off[i] > maxLogLineShow {
			for len(s) > maxLogLineShow {
				_, sz := utf8.DecodeLastRuneInString(s)
				s = s[:len(s)-sz]
			}
			s += "…"
		}
		out = append(out, Redact(s))
	}
	return out, from + 1
}

// attachLogs matches every mark to its instance's log and fills c.Logs.
// Instance names that are not plain file names are not looked up.
func (c *components) attachLogs(runDir string, started time.Time) {
	if runDir == "" || c == nil || len(c.Marks) == 0 {
		return
	}
	byInst := map[string][]int{}
	for k, m := range c.Marks {
		byInst[m.Inst] = append(byInst[m.Inst], k)
	}
	seen := map[string]int{} // inst + line → excerpt index
	for _, inst := range c.Lanes {
		ks := byInst[inst]
		if len(ks) == 0 || inst != filepath.Base(inst) || inst == "." || inst == ".." || strings.ContainsAny(inst, `/\`) {
			continue
		}
		// Incarnations for marks that do not carry one (older histories):
		// the first start is 1, each later start adds one.
		cur := 1
		seenStart := false
		for _, k := range ks {
			m := &c.Marks[k]
			if m.Kind == cmStart {
				if seenStart || m.Label == "restart" {
					cur++
				}
				seenStart = true
			}
			if m.Inc == 0 {
				m.Inc = cur
			} else {
				cur = m.Inc
			}
		}
		name := inst + ".log"
		path := filepath.Join(runDir, name)
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		var names []string
		have := map[string]bool{}
		for _, k := range ks {
			if fp := c.Marks[k].Failpoint; fp != "" && !have[fp] {
				have[fp] = true
				names = append(names, fp)
			}
		}
		ix, err := indexLog(f, started, names)
		if err != nil || ix == nil {
			f.Close()
			continue
		}
		href := "./" + url.PathEscape(Redact(name))
		for _, k := range ks {
			if len(c.Logs) >= maxLogExcerpts {
				break
			}
			m := &c.Marks[k]
			line, why := ix.match(*m)
			if line < 0 {
				continue
			}
			key := inst + "\x00" + fmt.Sprint(line)
			if e, ok := seen[key]; ok {
				m.Log = e
				continue
			}
			lines, from := ix.excerpt(f, line)
			seen[key] = len(c.Logs)
			m.Log = len(c.Logs)
			c.Logs = append(c.Logs, logExcerpt{Inst: Redact(inst), File: Redact(name), Href: href, Line: line + 1, From: from,
				Lines: lines, Why: why, Total: len(ix.off), Cut: ix.cut})
		}
		f.Close()
	}
}
