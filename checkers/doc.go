// Package checkers proves or disproves the invariants of DESIGN §7 over a
// history. Each checker is a pure function of models.History (no I/O), gives
// a three-way verdict with the op indices that prove each violation, and
// never flags what the history cannot prove: a false positive is a worse
// defect than a missed bug.
//
// Use CheckAll for a verdict.json (models.Verdict): it digests the history
// once into an Index (per order: client ops, world effects matched to the
// saga spec's actions, events, final state; per SKU the stock; outbox rows
// and snapshots; applied records; the harness's observations) and runs the
// catalogue over it. All, Lookup and Describe expose the catalogue; every
// Checker also runs alone on a history.
//
// One file per invariant (terminates.go, allornothing.go, doubleeffect.go,
// compensation.go, pivot.go, outbox.go, order.go, conservation.go,
// idempotency.go, delivery.go, drains.go); each checker's doc comment states
// its invariant exactly and what evidence it needs. complete.go holds the
// verdict's preconditions: a history that does not prove it is complete
// (run-end, every planned snapshot closed with its row count) or in which
// nothing happened to judge has no valid result. Checkers read step names only from the
// models.SagaSpec they are given and op names only from models/vocab.go.
//
// Cost: one pass to index (a small decoder for the flat JSON values keeps
// it above ~500k ops/s on one core), then linear work per checker; the only
// sorts are of partitions or consumers found out of order.
//
// The verdict.json schema and the kinds of violations are in
// docs/verdict.md. Tests: golden fixtures in testdata/ named by their
// expected verdict, a rapid model of correct histories (gen_test.go) with
// targeted corruptions (corrupt_test.go), and saved runs in testdata/runs/.
package checkers
