// Package targets holds the systems under test and the manifest format that
// describes any target to the harness (DESIGN §10, docs/target-contract.md,
// docs/manifest.schema.json): which processes to start, with what env, which
// databases and topics they use, the SQL the observer runs for its final
// snapshot — and the target's domain as data (domain.go): the saga spec,
// the world providers, the workload and the resources. The order domain is
// domains/order.json; a manifest without domain sections gets it.
//
// The reference target (targets/reference) is started from such a manifest
// like any other target, so nothing about it is special to the harness.
// targets knows nothing about checkers.
package targets
