package reference_test

import (
	"context"
	"testing"
	"time"
)

// Many concurrent clients, declines and out-of-stock mixed in: every
// order ends APPROVED or CANCELLED and the world agrees with the states.
func TestSagaEndToEnd(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 100
	}
	reqs, stock := workload("e2e", n)
	s := startSystem(t, sysOpts{stock: stock})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	placed := s.placeAll(ctx, reqs, 16)
	// Every request again with the same key: nothing new may appear.
	again := s.placeAll(ctx, reqs[:n/5], 8)
	for id := range again {
		if _, ok := placed[id]; !ok {
			t.Errorf("a repeated Idempotency-Key created a new order %s", id)
		}
	}
	// The same new key from 8 clients at once: one order.
	var dups []orderReq
	for i := 0; i < 8; i++ {
		r := reqs[0]
		r.Key = "e2e-concurrent-dup"
		dups = append(dups, r)
	}
	concurrent := s.placeAll(ctx, dups, 8)
	if len(concurrent) != 1 {
		t.Errorf("8 concurrent requests with one key made %d orders", len(concurrent))
	}
	for id, r := range concurrent {
		placed[id] = r
	}
	final := s.settle(ctx, len(placed))
	s.verify(ctx, placed, final)
}
