package faults

import (
	"context"

	"pgregory.net/rapid"
)

// KafkaProduceErr makes the next produce requests write their records and
// then answer REQUEST_TIMED_OUT, so the producer retries: a real duplicate
// with a non-idempotent producer. Needs the embedded kfake broker.
type KafkaProduceErr struct {
	Count int `json:"count" doc:"produce requests answered with an error after the write"`
}

func init() { Register(func() Kind { return &KafkaProduceErr{Count: 1} }) }

// Name implements Kind.
func (*KafkaProduceErr) Name() string { return "kafka-produce-err" }

// Doc implements Kind.
func (*KafkaProduceErr) Doc() string {
	return "broker writes the next N produce requests, then answers an error (kfake only)"
}

// Validate implements Kind.
func (p *KafkaProduceErr) Validate() error {
	if p.Count < 1 {
		return Bad(p, "count", "%d is below 1", p.Count)
	}
	return nil
}

// Draw implements Kind: 1–5 requests.
func (p *KafkaProduceErr) Draw(t *rapid.T, _ Aim) (string, bool) {
	p.Count = drawCount(t, 5)
	return "", true
}

// Apply implements Kind.
func (p *KafkaProduceErr) Apply(_ context.Context, s System, _ Fault) (Effect, error) {
	return applyBroker(s, "produce", p.Count)
}
