// Package examples shows how to call the sagachaos harness from your own
// `go test`: harness.Check(t, manifest, spec, options…) lets rapid draw a
// workload and a fault plan from the scenario's ranges, runs the real target
// under each drawn case, and turns a verdict that is not valid into a
// property failure, which rapid shrinks to a smaller case and saves as a
// fail file (outside the repository by default; harness.FailFiles) that
// replays first on every later run.
package examples
