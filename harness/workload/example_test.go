package workload_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// A double-clicked order: two sends with one Idempotency-Key, the second
// answered from the target's idempotency store.
func ExampleDriver() {
	sent := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent++
		if sent > 1 {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"id":"o-1","status":"PENDING"}`)
	}))
	defer api.Close()

	rec, _ := models.NewRecorder(nil, models.Header{})
	d := workload.New(rec, api.URL)
	err := d.Run(context.Background(), scenarios.Workload{Clients: 1, Orders: []scenarios.OrderPlan{{
		Key: "k-1", Customer: "c-1", Items: []models.Item{{SKU: "sku-1", Qty: 1}}, Card: "tok_visa", Total: 900, Submissions: 2,
	}}})
	fmt.Println("run:", err, "orders invoked:", d.Invoked())
	for _, op := range rec.Ops() {
		fmt.Println(op)
	}
	// Output:
	// run: <nil> orders invoked: 1
	// #0 client-0 invoke place-order {"key":"k-1","customer":"c-1","items":[{"sku":"sku-1","qty":1}],"card":"tok_visa","total":900,"attempt":1}
	// #1 client-0 ok place-order order=o-1 {"key":"k-1","status":202,"order":"o-1"}
	// #2 client-0 invoke place-order {"key":"k-1","customer":"c-1","items":[{"sku":"sku-1","qty":1}],"card":"tok_visa","total":900,"attempt":2}
	// #3 client-0 ok place-order order=o-1 {"key":"k-1","status":202,"order":"o-1","replayed":true}
}
