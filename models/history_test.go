package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRecorderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	rec, err := NewRecorder(&buf, Header{Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				rec.Record("client-1", Invoke, FPlaceOrder, "", PlaceOrder{Key: "k"})
			}
		}()
	}
	wg.Wait()
	rec.Record(ProcGateway, Effect, FCharge, "o-1", ChargeEffect{Amount: 5, Status: ChargeSucceeded})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 801 || h.Header.Run != "r1" || h.Truncated {
		t.Fatalf("got %d ops, header %+v, truncated %v", len(h.Ops), h.Header, h.Truncated)
	}
	var last int64 = -1
	for _, op := range h.Ops {
		if op.T < last {
			t.Fatalf("op %d time %d before previous %d", op.I, op.T, last)
		}
		last = op.T
	}
	var ch ChargeEffect
	if err := h.Ops[800].Decode(&ch); err != nil || ch.Amount != 5 || h.Ops[800].Order != "o-1" {
		t.Fatalf("decode: %v %+v", err, ch)
	}
}

// A harness killed mid-write leaves a cut final line: everything before it
// must still read.
func TestReadTruncatedTail(t *testing.T) {
	var buf bytes.Buffer
	rec, _ := NewRecorder(&buf, Header{})
	rec.Record("client-0", Invoke, FPlaceOrder, "", nil)
	rec.Record("client-0", Ok, FPlaceOrder, "o-1", nil)
	b := buf.Bytes()
	cut := b[:len(b)-10]
	h, err := ReadHistory(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if !h.Truncated || len(h.Ops) != 1 {
		t.Fatalf("truncated=%v ops=%d, want true 1", h.Truncated, len(h.Ops))
	}
}

func TestReadErrorsNameTheLine(t *testing.T) {
	hdr := `{"format":"sagachaos-history","version":1}` + "\n"
	op0 := `{"i":0,"t":1,"proc":"p","type":"invoke","f":"x"}` + "\n"
	cases := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"empty", "", 1, "no header"},
		{"bad header", "{}\n", 1, "format"},
		{"future version", `{"format":"sagachaos-history","version":99}` + "\n", 1, "version 99"},
		{"garbage middle", hdr + "not json\n" + op0, 2, "invalid character"},
		{"bad type", hdr + `{"i":0,"t":1,"proc":"p","type":"nope","f":"x"}` + "\n", 2, "unknown op type"},
		{"gap in index", hdr + op0 + `{"i":5,"t":1,"proc":"p","type":"ok","f":"x"}` + "\n", 3, "index 5"},
		{"no proc", hdr + `{"i":0,"t":1,"type":"ok","f":"x"}` + "\n", 2, "without proc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadHistory(strings.NewReader(c.in))
			var re *ReadError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *ReadError", err)
			}
			if re.Line != c.line || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v (line %d), want line %d containing %q", err, re.Line, c.line, c.msg)
			}
		})
	}
}

func TestRecorderSurvivesWithFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := NewRecorder(f, Header{})
	rec.Record("nemesis", Info, "kill", "", FaultRecord{ID: "f1", Kind: "kill", Phase: PhaseInstant})
	// No Close, no flush: each op is one write(2), so the file is complete now.
	h, err := ReadHistoryFile(path)
	if err != nil || len(h.Ops) != 1 {
		t.Fatalf("read back: %v, %d ops", err, len(h.Ops))
	}
	f.Close()
}

func TestWriteHistoryRoundTrip(t *testing.T) {
	in := &History{Ops: []Op{{I: 0, Proc: "observer", Type: State, F: FOrderState, Order: "o-1", Value: []byte(`{"status":"APPROVED"}`)}}}
	var buf bytes.Buffer
	if err := WriteHistory(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadHistory(&buf)
	if err != nil || len(out.Ops) != 1 || string(out.Ops[0].Value) != `{"status":"APPROVED"}` {
		t.Fatalf("round trip: %v %+v", err, out)
	}
}

func FuzzReadHistory(f *testing.F) {
	f.Add([]byte(`{"format":"sagachaos-history","version":1}` + "\n" + `{"i":0,"t":1,"proc":"p","type":"invoke","f":"x","value":{"a":1}}` + "\n"))
	f.Add([]byte(`{"format":"sagachaos-history","version":1}` + "\n" + `{"i":0,"t":1,"proc":"p","type":"ok"`))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHistory(bytes.NewReader(b))
		if err == nil && h == nil {
			t.Fatal("nil history without error")
		}
		if err == nil {
			for i, op := range h.Ops {
				if op.I != int64(i) {
					t.Fatalf("op %d has index %d", i, op.I)
				}
			}
		}
	})
}

func TestComposeAndExitCodes(t *testing.T) {
	cases := []struct {
		in   []Status
		want Status
		code int
	}{
		{nil, Valid, 0},
		{[]Status{Valid, Unknown}, Unknown, 3},
		{[]Status{Unknown, Invalid, Valid}, Invalid, 1},
	}
	for _, c := range cases {
		var rs []CheckResult
		for _, s := range c.in {
			rs = append(rs, CheckResult{Status: s})
		}
		got := Compose(rs)
		if got != c.want || got.ExitCode() != c.code {
			t.Errorf("Compose(%v) = %v (exit %d), want %v (exit %d)", c.in, got, got.ExitCode(), c.want, c.code)
		}
	}
}

// The digest a Recorder reports is that of the bytes it wrote, which is what
// ReadHistory computes from the file: a verdict made in the run and one made
// by `sagachaos check` name the same history.
func TestDigestRecorderMatchesReader(t *testing.T) {
	var buf bytes.Buffer
	rec, err := NewRecorder(&buf, Header{Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(ProcHarness, Info, FRunStart, "", RunInfo{ID: "r1"})
	rec.Record("client-1", Invoke, "place-order", "o-1", map[string]int{"n": 1})
	live := rec.History().Digest
	h, err := ReadHistory(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	want := DigestPrefix + hex.EncodeToString(sum[:])
	if live != want || h.Digest != want {
		t.Fatalf("recorder digest %s, reader digest %s, sha256 of the file %s", live, h.Digest, want)
	}
	// A cut-off last line is part of the file, and so of its digest.
	cut := append(append([]byte(nil), buf.Bytes()...), `{"i":2,"t":5,"pr`...)
	h2, err := ReadHistory(bytes.NewReader(cut))
	if err != nil || !h2.Truncated {
		t.Fatalf("truncated read: %v, truncated %v", err, h2.Truncated)
	}
	if h2.Digest == want || h2.Digest == "" {
		t.Fatalf("digest of the cut file %q, want one that differs from the whole file's", h2.Digest)
	}
	if mem, _ := NewRecorder(nil, Header{}); mem.History().Digest != "" {
		t.Fatal("an in-memory history has a digest")
	}
}
