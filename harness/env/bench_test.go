package env

import (
	"context"
	"testing"
	"time"
)

// BenchmarkColdStart measures the full embedded environment a run needs:
// local PostgreSQL with 4 databases, kfake with a topic, and a postgres and
// a kafka link for each of 4 components; Close included in the loop but not
// in the figure reported as "up-ms". The initdb template is cached across
// runs (the first Up on a machine pays initdb once; see pgTemplate).
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	components := []string{"orders", "inventory", "payment", "relay-1"}
	var up time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e, err := Up(ctx, Config{Databases: testDBs, Topics: []Topic{{Name: "events", Partitions: 3}}})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range components {
			if _, err := e.ProxiedDSN(c, c); err != nil {
				b.Fatal(err)
			}
			if _, err := e.KafkaBrokersFor(c); err != nil {
				b.Fatal(err)
			}
		}
		up += time.Since(start)
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "up-ms")
}
