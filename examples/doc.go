// Package examples shows how to call the sagachaos harness from your own
// `go test`, with rapid driving the scenario generator: rapid draws a
// workload and a fault plan, the harness runs the real target under it, and
// a failing verdict fails the property, so rapid shrinks the case for you.
package examples
