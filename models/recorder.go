package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"
)

// Recorder appends ops to a history as they happen. It is safe for
// concurrent use: it assigns dense indices and monotonic times under one
// lock, and writes each op as one line with a single Write call, so a
// harness that dies mid-run leaves every op recorded before the death on
// disk (the OS keeps what write(2) accepted even if the process is killed).
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	w     io.Writer
	ops   []Op
	err   error
	buf   []byte
	sum   hash.Hash // of every byte written, for History.Digest
	subs  []*subscription
}

type subscription struct {
	fn func(Op)
	// mu guards next (the index of the next op fn has not seen), running
	// (a goroutine is delivering to fn) and done.
	mu      sync.Mutex
	next    int64
	running bool
	done    bool
}

// NewRecorder writes the header to w and returns a recorder whose op times
// count from now. w may be nil for an in-memory history.
func NewRecorder(w io.Writer, hd Header) (*Recorder, error) {
	r := &Recorder{start: time.Now(), w: w, sum: sha256.New()}
	hd.Format = HistoryFormat
	hd.Version = HistoryVersion
	if hd.Started == "" {
		hd.Started = r.start.UTC().Format(time.RFC3339Nano)
	}
	if w != nil {
		b, err := json.Marshal(hd)
		if err != nil {
			return nil, fmt.Errorf("marshal history header: %w", err)
		}
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return nil, fmt.Errorf("write history header: %w", err)
		}
		r.sum.Write(b)
	}
	return r, nil
}

// Start is the wall-clock instant op times count from.
func (r *Recorder) Start() time.Time { return r.start }

// Record appends one op. value is marshalled to JSON (a json.RawMessage is
// kept as is; nil means no value). It returns the op as recorded. A value
// that cannot be marshalled is recorded as {"marshal_error": "..."} so that
// nothing is silently dropped.
func (r *Recorder) Record(proc string, typ OpType, f, order string, value any) Op {
	var raw json.RawMessage
	switch v := value.(type) {
	case nil:
	case json.RawMessage:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
		}
		raw = b
	}
	r.mu.Lock()
	op := r.append(proc, typ, f, order, raw)
	subs := r.subs
	r.mu.Unlock()
	for _, s := range subs {
		r.deliver(s)
	}
	return op
}

// Subscribe calls fn with every op recorded from now on, in index order,
// one at a time, outside the recorder's lock (fn may record ops itself;
// they are delivered to fn after the current call returns). Deliveries
// happen on the goroutines that record, so fn must be quick and must not
// block. The returned cancel stops deliveries; it is idempotent.
func (r *Recorder) Subscribe(fn func(Op)) (cancel func()) {
	r.mu.Lock()
	s := &subscription{fn: fn, next: int64(len(r.ops))}
	r.subs = append(r.subs[:len(r.subs):len(r.subs)], s)
	r.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
		r.mu.Lock()
		defer r.mu.Unlock()
		kept := make([]*subscription, 0, len(r.subs))
		for _, x := range r.subs {
			if x != s {
				kept = append(kept, x)
			}
		}
		r.subs = kept
	}
}

// deliver hands s every op it has not seen yet. One goroutine at a time
// delivers to a subscription; an op recorded while it does (by another
// goroutine, or by fn itself) is delivered by that same loop, never lost
// and never delivered twice: the loop decides it is done while holding
// r.mu, so an op appended after that finds running false and delivers
// itself.
func (r *Recorder) deliver(s *subscription) {
	s.mu.Lock()
	if s.running || s.done {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	for {
		r.mu.Lock()
		s.mu.Lock()
		if s.done || s.next >= int64(len(r.ops)) {
			s.running = false
			s.mu.Unlock()
			r.mu.Unlock()
			return
		}
		op := r.ops[s.next]
		s.next++
		s.mu.Unlock()
		r.mu.Unlock()
		s.fn(op)
	}
}

func (r *Recorder) append(proc string, typ OpType, f, order string, raw json.RawMessage) Op {
	op := Op{I: int64(len(r.ops)), T: int64(time.Since(r.start)), Proc: proc, Type: typ, F: f, Order: order, Value: raw}
	r.ops = append(r.ops, op)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(op)
		if err == nil {
			r.buf = append(r.buf[:0], b...)
			r.buf = append(r.buf, '\n')
			_, err = r.w.Write(r.buf)
		}
		if err == nil {
			r.sum.Write(r.buf)
		}
		if err != nil {
			r.err = fmt.Errorf("write history op %d: %w", op.I, err)
		}
	}
	return op
}

// Ops returns a copy of the ops recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Len is the number of ops recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// History returns the recorded history so far. When the recorder writes to
// a file and no write failed, its Digest is that of the file's bytes.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Header: Header{Format: HistoryFormat, Version: HistoryVersion, Started: r.start.UTC().Format(time.RFC3339Nano)}, Ops: append([]Op(nil), r.ops...)}
	if r.w != nil && r.err == nil {
		h.Digest = DigestPrefix + hex.EncodeToString(r.sum.Sum(nil))
	}
	return h
}

// Err reports the first write error, if any. Ops are still kept in memory
// after a write error.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
