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

// declOf finds the target op among the first ops of h (it follows
// run-start).
func declOf(h *models.History) (*models.TargetDecl, int64) {
	if h == nil {
		return nil, -1
	}
	for k := range h.Ops {
		op := &h.Ops[k]
		if op.Proc == models.ProcHarness && op.F == models.FTarget {
			var d models.TargetDecl
			if op.Decode(&d) != nil {
				return nil, op.I
			}
			return &d, op.I
		}
		if op.Proc != models.ProcHarness && op.Type != models.Info {
			break // the target op comes before the workload
		}
	}
	return nil, -1
}

// resolveDomain sets the index's domain from h's declaration: the saga
// (fallback for a history that declares none and is not outbox-only), the
// resources and the seq source.
func (ix *Index) resolveDomain(h *models.History, fallback models.SagaSpec) models.SagaSpec {
	d, _ := declOf(h)
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
