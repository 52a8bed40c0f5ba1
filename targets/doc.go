// Package targets holds the systems under test and the manifest format that
// describes any target to the harness (DESIGN §10): which processes to start,
// with what env, which databases and topics they use, where the workload API
// is, and the SQL the observer runs for its final snapshot.
//
// The reference target (targets/reference) is started from such a manifest
// like any other target, so nothing about it is special to the harness.
// targets knows nothing about checkers.
package targets
