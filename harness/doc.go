// Package harness runs the loop of DESIGN §1: environment up, target up from
// its manifest, workload and nemesis concurrently, heal, quiesce, observe,
// check, write the run directory. Its subpackages own one piece each: env
// (PostgreSQL, Kafka, toxiproxy links), world (the fake third parties),
// supervisor (target processes), workload (the clients), observe (the final
// snapshot). It knows no target's internals: targets are manifests.
package harness
