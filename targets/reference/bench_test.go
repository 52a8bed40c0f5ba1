package reference_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// BenchmarkThroughput measures, on one embedded environment, end-to-end
// sagas per second with no faults (placed by 16 clients, timed until all
// are APPROVED) and, for comparison, plain PostgreSQL commits per second
// (16 connections, one single-row INSERT per transaction) on the same
// cluster.
//
//	go test -run '^$' -bench Throughput -benchtime 400x ./targets/reference/
func BenchmarkThroughput(b *testing.B) {
	stock := map[string]int64{"sku-1": 1 << 40, "sku-2": 1 << 40}
	s := startSystem(b, sysOpts{stock: stock})
	ctx := context.Background()
	var round atomic.Int64

	b.Run("saga-e2e", func(b *testing.B) {
		r := round.Add(1)
		reqs := make([]orderReq, b.N)
		for i := range reqs {
			reqs[i] = orderReq{Key: fmt.Sprintf("bench-%d-%d", r, i), Customer: "c-1", Card: "tok_visa", Total: 100,
				Items: []models.Item{{SKU: fmt.Sprintf("sku-%d", 1+i%2), Qty: 1}}}
		}
		before, _ := s.orders(ctx)
		b.ResetTimer()
		start := time.Now()
		placed := s.placeAll(ctx, reqs, 16)
		final := s.settle(ctx, len(before)+len(placed))
		el := time.Since(start)
		b.StopTimer()
		for _, o := range final {
			if o.Status != models.StatusApproved {
				b.Fatalf("order %s ended %s in a fault-free run", o.ID, o.Status)
			}
		}
		b.ReportMetric(float64(b.N)/el.Seconds(), "orders/s")
	})

	b.Run("postgres-commits", func(b *testing.B) {
		p := s.pool("orders")
		if _, err := p.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_commits (id bigserial PRIMARY KEY, v bigint NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if _, err := p.Exec(ctx, `INSERT INTO bench_commits (v) VALUES ($1)`, c); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	})
}
