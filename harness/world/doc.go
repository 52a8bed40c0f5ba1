// Package world runs the harness-owned fake third parties of DESIGN §4, as
// the target's manifest declares them (models.Provider; the order domain's
// gateway, carrier and mailer are three declarations): each provider is an
// HTTP server on 127.0.0.1 whose actions are POST endpoints, and records
// every call it acts on as an Effect op (Proc "world/<provider>", F the
// action's name) through a *models.Recorder. The world is ground truth: a
// double refund is two refund effects, whatever the target's database says.
//
// What an action does is its provider kind's, a registry with one file per
// kind: plain (kinds.go; an id per call, a refers field must name an
// earlier effect) and payments (payments.go; charges and refunds with
// amounts). Every provider has the idempotency semantics of a real one
// (Stripe):
//
//   - same Idempotency-Key, same body: the stored answer, header
//     Idempotent-Replayed: true, and an Effect op with replay=true (nothing
//     happens again, but the history shows the retry);
//   - same key, another body: 409 idempotency_key_reused;
//   - same key while the first request is still executing: 409
//     idempotency_in_progress;
//   - no key: every request is a new effect.
//
// Outcomes are chosen by the action's outcome field (a value containing
// decline is declined with 402; ambiguous_500 is applied and answered 500;
// ambiguous_hang is applied and never answered) or injected by the nemesis
// with InjectAmbiguous. Requests the world refuses without acting (bad JSON,
// a missing field, idempotency conflicts) are recorded as Info ops with a
// Refusal value, so "every call is in the history" holds without polluting
// the effects checkers count.
//
// IDs are deterministic: each action numbers its effects in the order it
// applies them, after its id prefix (ch_000001, re_000001, …).
package world
