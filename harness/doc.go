// Package harness runs the loop of DESIGN §1 once: Run is the short list
// of its stages. Each stage is a package of its own:
//
//   - runstore: the run directory (scenario.json, history.jsonl, the one
//     atomic artifact writer, the one replay-line builder);
//   - target: build, failpoint catalogue, --target resolution, templating,
//     process lifecycle and crash-restart;
//   - env: PostgreSQL, Kafka and the toxiproxy links;
//   - world: the fake third parties;
//   - workload: the clients;
//   - nemesis: the fault plan, applied and undone, and its journal;
//   - observe: quiescence and the final snapshot;
//   - supervisor: the OS processes under the target stage.
//
// The self-test gate (gate) and shrinking (shrink) are built on Run. The
// harness knows no target's internals: targets are manifests.
package harness
