package faults

import (
	"context"

	"pgregory.net/rapid"
)

// KafkaCommitErr makes the next offset commits store the offset and then
// answer REQUEST_TIMED_OUT. Needs the embedded kfake broker.
type KafkaCommitErr struct {
	Count int `json:"count" doc:"offset commits answered with an error after the store"`
}

func init() { Register(func() Kind { return &KafkaCommitErr{Count: 1} }) }

// Name implements Kind.
func (*KafkaCommitErr) Name() string { return "kafka-commit-err" }

// Doc implements Kind.
func (*KafkaCommitErr) Doc() string {
	return "broker stores the next N offset commits, then answers an error (kfake only)"
}

// Validate implements Kind.
func (p *KafkaCommitErr) Validate() error {
	if p.Count < 1 {
		return Bad(p, "count", "%d is below 1", p.Count)
	}
	return nil
}

// Draw implements Kind: 1–5 requests.
func (p *KafkaCommitErr) Draw(t *rapid.T, _ Aim) (string, bool) {
	p.Count = drawCount(t, 5)
	return "", true
}

// Apply implements Kind.
func (p *KafkaCommitErr) Apply(_ context.Context, s System, _ Fault) (Effect, error) {
	return applyBroker(s, "commit", p.Count)
}
