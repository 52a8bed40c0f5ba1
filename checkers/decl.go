package checkers

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// This file is how checkers learn the target's domain: from the target op
// of the history (models.TargetDecl), never from the manifest, so that a
// saved run is re-checked offline from its history alone. A history whose
// target op predates the domain declarations (or that has none) is the
// order domain's (models.LegacyOrderDomain).

// Check runs the whole catalogue over h with the domain h declares.
func Check(h *models.History) models.Verdict {
	s, _ := models.LegacyOrderDomain()
	return CheckAll(h, s)
}

// declOf finds the target op among the first ops (it follows run-start):
// the declaration, its index, and whether it failed to decode (a broken
// target op is not an older history: nothing it would declare is known).
// It is the one reading of the target op; NewIndex and HealthOf use it.
func declOf(ops []models.Op) (d *models.TargetDecl, at int64, broken bool) {
	for k := range ops {
		op := &ops[k]
		if op.Proc == models.ProcHarness && op.F == models.FTarget {
			var d models.TargetDecl
			if op.Decode(&d) != nil {
				return nil, op.I, true
			}
			return &d, op.I, false
		}
		if op.Proc != models.ProcHarness && op.Type != models.Info {
			break // the target op comes before the workload
		}
	}
	return nil, -1, false
}

// resolveDomain sets the index's declaration (Target, TargetOp) and domain
// from h's target op: the saga (fallback for a history that declares none
// and is not outbox-only), the resources and the seq source. An
// undecodable target op is a bad "harness:target" op: the checkers that
// read the consumers or relays say unknown; the domain falls back to the
// order domain's, as for a history without one.
func (ix *Index) resolveDomain(h *models.History, fallback models.SagaSpec) models.SagaSpec {
	var d *models.TargetDecl
	if h != nil {
		var broken bool
		d, ix.TargetOp, broken = declOf(h.Ops)
		if broken {
			ix.bad("harness:"+models.FTarget, ix.TargetOp)
		}
	}
	ix.Target = d
	saga, res, legacy := d.Domain()
	ix.Resources = res
	if d != nil {
		ix.SeqFromOutbox = d.SeqFromOutbox
		ix.StartOp = d.StartOp
	}
	switch {
	case saga == nil:
		ix.NoSaga = true
		return models.SagaSpec{}
	case legacy:
		return fallback
	}
	return *saga
}

// sagaCheckers judge sagas: an outbox-only target (no saga declared) has
// none to judge.
var sagaCheckers = map[string]bool{
	"saga-terminates": true, "all-or-nothing": true, "no-double-effect": true,
	"compensation-order": true, "pivot": true,
}

// notApplicable says why checker has nothing to judge in ix ("" when it
// has): saga checkers on an outbox-only target, conservation without
// declared resources.
func (ix *Index) notApplicable(checker string) string {
	switch {
	case ix.NoSaga && sagaCheckers[checker]:
		return "the target declares no saga (an outbox-only target): only the outbox and delivery checkers apply"
	case checker == "conservation" && len(ix.Resources) == 0:
		return "the target declares no resource to conserve"
	}
	return ""
}

// isStart reports whether op is a client's saga start: a client process's
// op of the declared start op (the order domain's place-order, or
// start-saga).
func (ix *Index) isStart(op *models.Op) bool {
	switch op.F {
	case models.FPlaceOrder, models.FStartSaga:
		return true
	}
	return ix.StartOp != "" && op.F == ix.StartOp && strings.HasPrefix(op.Proc, models.ProcClientPfx)
}

func (r *ResourceFacts) put(key string, f StockFact) {
	if _, seen := r.Final[key]; !seen {
		r.Keys = append(r.Keys, key)
	}
	r.Final[key] = f
}

// RequestBody decodes the body of the start request of o: the invoke
// behind its first ack, or else the first invoke sent with the key its
// final state carries (an ack lost to a timeout). nil when unknown.
func (ix *Index) RequestBody(o *OrderFacts) any {
	op := o.InvokeOp
	if op < 0 && o.Final != nil && o.Final.IdempotencyKey != "" {
		if kf := ix.Keys[o.Final.IdempotencyKey]; kf != nil {
			op = kf.Invoke
		}
	}
	if op < 0 {
		return nil
	}
	body, ok := models.RequestBody(ix.Ops[op].Value)
	if !ok {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}
