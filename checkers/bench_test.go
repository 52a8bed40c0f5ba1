package checkers

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

var benchCache sync.Map // ops -> *models.History

// benchHistory generates a correct history of about n ops (≈ 22 ops per
// order) with enough stock that most orders go the whole way.
func benchHistory(n int) *models.History {
	if h, ok := benchCache.Load(n); ok {
		return h.(*models.History)
	}
	ch := newRand(uint64(n))
	stock, plans := randomPlans(ch, n/22)
	for k := range stock {
		stock[k] = int64(n)
	}
	h, _ := genHistory(ch, stock, plans)
	benchCache.Store(n, h)
	return h
}

func BenchmarkCheckAll(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			if n > 100_000 && testing.Short() {
				b.Skip("1M-op history is generated only without -short")
			}
			h := benchHistory(n)
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if v := CheckAll(h, models.OrderSaga); v.Status != models.Valid {
					b.Fatalf("generated history judged %s:%s", v.Status, describe(v))
				}
			}
			b.ReportMetric(float64(len(h.Ops))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(len(h.Ops)), "history-ops")
			// the machine is shared: CPU time says what the checkers cost
			// even when wall time includes waiting for a core
			b.ReportMetric(float64(len(h.Ops))*float64(b.N)/(cpuTime()-cpu0).Seconds(), "cpu-ops/s")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
