// Package models says what correct means for sagachaos. It owns the history
// (Op, the Recorder that writes it as it happens, the JSONL reader), the
// vocabulary every part of the loop uses to write ops (client, nemesis, world,
// observer), the Kafka event envelope, the saga spec (steps, kinds,
// compensations, effects) and the verdict types that checkers produce and
// reports render.
//
// models imports nothing else of ours: checkers and reports depend only on it,
// so a saved run directory can be re-checked and re-rendered offline.
//
// The history format is documented in docs/history.md.
package models
