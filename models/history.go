package models

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// HistoryFormat names the file format in the header line of history.jsonl.
const HistoryFormat = "sagachaos-history"

// HistoryVersion is the version of the history format this code writes and
// the newest it reads.
const HistoryVersion = 1

// Header is the first line of a history file.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Started is the wall-clock start of the run (RFC 3339); op times are
	// monotonic nanoseconds relative to it.
	Started string `json:"started,omitempty"`
	Run     string `json:"run,omitempty"`
}

// History is a whole run's record: its header and its ops in index order.
type History struct {
	Header Header
	Ops    []Op
	// Truncated is set when the last line was cut short (the harness died
	// while writing it); that line is dropped and everything before it kept.
	Truncated bool
	// Digest identifies the bytes the history was read from (or, from a
	// Recorder, the bytes it wrote): "sha256:" and the hex digest of the
	// whole file. Empty for a history built in memory. A verdict records
	// it (Verdict.HistoryDigest), so a reader can tell whether a verdict
	// judges the history beside it.
	Digest string
}

// DigestPrefix starts every History.Digest.
const DigestPrefix = "sha256:"

// ReadError says which line of a history could not be read and why.
type ReadError struct {
	Line int
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("history line %d: %v", e.Line, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// maxLine bounds one history line; a longer line is damage, not data.
const maxLine = 16 << 20

// ReadHistory reads a JSONL history. A damaged line yields a *ReadError
// naming it; a cut-off final line (no trailing newline and not valid JSON) is
// dropped and reported through History.Truncated, because that is what a
// harness killed mid-write leaves behind. It never panics.
func ReadHistory(r io.Reader) (*History, error) {
	sum := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, sum), 1<<16)
	h := &History{}
	line := 0
	sawHeader := false
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Long line: collect it in pieces.
			buf := append([]byte(nil), raw...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(buf) > maxLine {
					return h, &ReadError{Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxLine)}
				}
				raw, err = br.ReadSlice('\n')
				buf = append(buf, raw...)
			}
			raw = buf
		}
		if len(raw) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return h, &ReadError{Line: line + 1, Err: err}
		}
		line++
		complete := err == nil
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 {
			if err == io.EOF {
				break
			}
			continue
		}
		if !sawHeader {
			sawHeader = true
			if err := parseHeader(trimmed, &h.Header); err != nil {
				return h, &ReadError{Line: line, Err: err}
			}
			if err == io.EOF {
				break
			}
			continue
		}
		op, perr := parseOp(trimmed)
		if perr != nil {
			if !complete {
				h.Truncated = true
				break
			}
			return h, &ReadError{Line: line, Err: perr}
		}
		if op.I != int64(len(h.Ops)) {
			return h, &ReadError{Line: line, Err: fmt.Errorf("op index %d, want %d (indices must be dense and in order)", op.I, len(h.Ops))}
		}
		h.Ops = append(h.Ops, op)
		if err == io.EOF {
			break
		}
	}
	if !sawHeader {
		return h, &ReadError{Line: 1, Err: errors.New("empty history: no header line")}
	}
	// The digest covers every byte, a cut-off last line included.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return h, &ReadError{Line: line + 1, Err: err}
	}
	h.Digest = DigestPrefix + hex.EncodeToString(sum.Sum(nil))
	return h, nil
}

func parseHeader(b []byte, hd *Header) error {
	if err := json.Unmarshal(b, hd); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if hd.Format != HistoryFormat {
		return fmt.Errorf("header: format %q, want %q", hd.Format, HistoryFormat)
	}
	if hd.Version < 1 || hd.Version > HistoryVersion {
		return fmt.Errorf("header: version %d not supported (this build reads 1..%d)", hd.Version, HistoryVersion)
	}
	return nil
}

func parseOp(b []byte) (Op, error) {
	var op Op
	if err := json.Unmarshal(b, &op); err != nil {
		return op, err
	}
	if !op.Type.Valid() {
		return op, fmt.Errorf("unknown op type %q", op.Type)
	}
	if op.Proc == "" {
		return op, errors.New("op without proc")
	}
	if op.I < 0 {
		return op, fmt.Errorf("negative op index %d", op.I)
	}
	return op, nil
}

// ReadHistoryFile reads a history from a file path.
func ReadHistoryFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	h, err := ReadHistory(f)
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// WriteHistory writes h as JSONL (header first). Used for fixtures and for
// re-writing a history; live runs write through a Recorder.
func WriteHistory(w io.Writer, h *History) error {
	bw := bufio.NewWriter(w)
	hd := h.Header
	if hd.Format == "" {
		hd.Format = HistoryFormat
	}
	if hd.Version == 0 {
		hd.Version = HistoryVersion
	}
	b, err := json.Marshal(hd)
	if err != nil {
		return fmt.Errorf("marshal header: %w", err)
	}
	bw.Write(b)
	bw.WriteByte('\n')
	for _, op := range h.Ops {
		b, err := json.Marshal(op)
		if err != nil {
			return fmt.Errorf("marshal op %d: %w", op.I, err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
