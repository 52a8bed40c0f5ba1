package world

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// BenchmarkCharge measures a keyed charge over loopback HTTP, recorded in an
// in-memory history: the world's cost per saga step.
func BenchmarkCharge(b *testing.B) {
	rec, _ := models.NewRecorder(nil, models.Header{})
	w, err := Start(context.Background(), rec, targets.OrderDomain().World)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	url := "http://" + w.Provider("gateway").Addr() + "/charges"
	i := 0
	for b.Loop() {
		i++
		r := post(context.Background(), http.DefaultClient, url, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"order_id":"o-%d","amount":100,"card":"tok_visa"}`, i))
		if r.err != nil || r.status != 200 {
			b.Fatalf("%d %v", r.status, r.err)
		}
	}
}
