package workload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sagachaos/sagachaos/harness/workload"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// A double-clicked trip booking: two sends with one Idempotency-Key, the
// second answered from the target's idempotency store. The workload
// declaration (the manifest's) says where to send it and what the history
// calls it.
func ExampleDriver() {
	sent := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent++
		if sent > 1 {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"trip":{"id":"t-1"},"status":"PENDING"}`)
	}))
	defer api.Close()

	rec, _ := models.NewRecorder(nil, models.Header{})
	spec := models.Workload{Op: "book-trip", Start: models.StartSpec{Path: "/trips", ID: "/trip/id"}}
	d := workload.New(rec, api.URL, workload.WithSpec(spec))
	err := d.Run(context.Background(), scenarios.Workload{Clients: 1, Sagas: []scenarios.SagaPlan{{
		Key: "k-1", Body: json.RawMessage(`{"customer":"c-1","flight":"LH-1","nights":2}`), Submissions: 2,
	}}})
	fmt.Println("run:", err, "sagas invoked:", d.Invoked())
	for _, op := range rec.Ops() {
		fmt.Println(op)
	}
	// Output:
	// run: <nil> sagas invoked: 1
	// #0 client-0 invoke book-trip {"key":"k-1","attempt":1,"body":{"customer":"c-1","flight":"LH-1","nights":2}}
	// #1 client-0 ok book-trip order=t-1 {"key":"k-1","status":202,"order":"t-1"}
	// #2 client-0 invoke book-trip {"key":"k-1","attempt":2,"body":{"customer":"c-1","flight":"LH-1","nights":2}}
	// #3 client-0 ok book-trip order=t-1 {"key":"k-1","status":202,"order":"t-1","replayed":true}
}
