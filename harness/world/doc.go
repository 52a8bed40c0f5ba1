// Package world runs the harness-owned fake third parties of DESIGN §4: a
// payment gateway (charges, refunds), a carrier (shipments) and a mailer
// (e-mails), each an HTTP server on 127.0.0.1 that records every call it
// acts on as an Effect op through a *models.Recorder. The world is ground
// truth: a double refund is two refund effects, whatever the target's
// database says.
//
// The HTTP API is the one in docs/target-contract.md ("The world"). All three
// services share the idempotency semantics of a real provider (Stripe):
//
//   - same Idempotency-Key, same body: the stored answer, header
//     Idempotent-Replayed: true, and an Effect op with Replay=true (no money
//     moves, but the history shows the retry);
//   - same key, another body: 409 idempotency_key_reused;
//   - same key while the first request is still executing: 409
//     idempotency_in_progress;
//   - no key: every request is a new effect.
//
// Ambiguous failures (the effect is applied but the caller does not learn
// it) are decided by the card token (tok_ambiguous_500…, tok_ambiguous_hang…)
// or injected by the nemesis with InjectAmbiguous. Requests the world refuses
// without acting (bad JSON, idempotency conflicts) are recorded as Info ops
// with a Refusal value, so "every call is in the history" holds without
// polluting the effects checkers count.
//
// IDs are deterministic: each service numbers its effects in the order it
// applies them (ch_000001, re_000001, sh_000001, em_000001).
package world
