// Package reference is the reference target: the correct orchestrated
// order saga (DESIGN §4) as real processes over PostgreSQL and Kafka.
//
// The binary (cmd/reftarget) runs one component per process: orders (the
// workload API and the orchestrator), inventory, payment, delivery and any
// number of competing relays. manifest.json tells the harness how to start
// them. The package itself holds only the integration tests.
package reference
