package models

import (
	"sync"
	"testing"
)

// A subscriber sees every op recorded after it subscribed exactly once, in
// index order, even when many goroutines record at once and the
// subscriber records ops of its own; after cancel it sees nothing more.
func TestSubscribeDeliversEveryOpOnceInOrder(t *testing.T) {
	rec, err := NewRecorder(nil, Header{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Record("before", Info, "x", "", nil) // not delivered: before Subscribe
	var mu sync.Mutex
	var seen []int64
	cancel := rec.Subscribe(func(op Op) {
		mu.Lock()
		seen = append(seen, op.I)
		mu.Unlock()
		if op.Proc == "client" && op.I%10 == 0 {
			rec.Record("echo", Info, "y", "", nil) // nested: delivered after this call
		}
	})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				rec.Record("client", Info, "z", "", nil)
			}
		})
	}
	wg.Wait()
	total := rec.Len()
	mu.Lock()
	got := append([]int64(nil), seen...)
	mu.Unlock()
	if len(got) != total-1 {
		t.Fatalf("delivered %d ops, want %d (every op after the first)", len(got), total-1)
	}
	for i, idx := range got {
		if idx != int64(i+1) {
			t.Fatalf("delivery %d is op %d, want op %d: out of order, lost or doubled", i, idx, i+1)
		}
	}
	cancel()
	cancel()
	rec.Record("after", Info, "x", "", nil)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(got) {
		t.Fatalf("an op recorded after cancel was delivered")
	}
}
