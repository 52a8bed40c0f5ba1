package scenarios

import (
	"fmt"

	"pgregory.net/rapid"
)

// Races are the workload's request races: what the generator decides to
// race, per order; the driver (harness/workload) runs them.
type Races struct {
	// ConcurrentRate: an order's request is sent 2 or 3 times at the same
	// instant with one Idempotency-Key (a double click).
	ConcurrentRate float64 `json:"concurrent_rate"`
	// InflightRate: a duplicate is sent InflightMS after the first request,
	// answered or not (a proxy retry while the first is in flight).
	InflightRate float64 `json:"inflight_rate"`
	InflightMS   Range   `json:"inflight_ms"`
	// ParallelRate: the client places the order without waiting for its
	// previous order's answer (a burst on the same keys).
	ParallelRate float64 `json:"parallel_rate"`
	// RetrySpreadMS: retries after an unknown outcome are spread over a
	// window drawn from this range, so a retry can outlast a restarted API
	// (zero: the driver's short backoff).
	RetrySpreadMS Range `json:"retry_spread_ms"`
}

func (r *Races) validate() *SpecError {
	for _, x := range []struct {
		field string
		v     float64
	}{{"concurrent_rate", r.ConcurrentRate}, {"inflight_rate", r.InflightRate}, {"parallel_rate", r.ParallelRate}} {
		if x.v < 0 || x.v > 1 {
			return &SpecError{Field: "races." + x.field, Problem: fmt.Sprintf("%v is not a probability in [0, 1]", x.v)}
		}
	}
	for _, x := range []struct {
		field string
		v     Range
	}{{"inflight_ms", r.InflightMS}, {"retry_spread_ms", r.RetrySpreadMS}} {
		if x.v.Min < 0 || x.v.Max < x.v.Min {
			return &SpecError{Field: "races." + x.field, Problem: fmt.Sprintf("want 0 ≤ min ≤ max, got %d–%d", x.v.Min, x.v.Max)}
		}
	}
	return nil
}

// draw decides each order's races.
func (r *Races) draw(t *rapid.T, sc *Scenario) {
	for i := range sc.Workload.Sagas {
		o := &sc.Workload.Sagas[i]
		if coin(t, r.ConcurrentRate, "concurrent") {
			o.Concurrent = uniformInt(t, 1, 2, "concurrent-n")
		}
		if coin(t, r.InflightRate, "inflight") {
			o.DuplicateAfter = Duration(int64(uniformInt(t, r.InflightMS.Min, r.InflightMS.Max, "inflight-ms")) * 1e6)
		}
		if i > 0 && coin(t, r.ParallelRate, "parallel") {
			o.Parallel = true
		}
		if r.RetrySpreadMS.Max > 0 && o.RetryUnknown > 0 {
			o.RetrySpread = Duration(int64(uniformInt(t, r.RetrySpreadMS.Min, r.RetrySpreadMS.Max, "retry-spread")) * 1e6)
		}
	}
}
