// Package scenarios generates what a run does: the workload (orders, clients,
// stock, cards that decline or make the gateway ambiguous, duplicate
// submissions) and the fault plan, from a seed, with rapid generators drawing
// from the ranges in a named scenario file. A Scenario is plain data: it is
// written to scenario.json and a replay reads it back. This package starts no
// process.
package scenarios
