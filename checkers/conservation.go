package checkers

import (
	"fmt"
	"sort"

	"github.com/sagachaos/sagachaos/models"
)

// checkConservation is conservation.
//
// Invariant, on stock (final stock states, initial-stock op):
//   - available ≥ 0 and reserved ≥ 0 for every SKU ("negative-stock");
//   - initial = available + reserved for every SKU ("stock-not-conserved");
//   - reserved = Σ qty of that SKU over orders that ended spec.Success
//     ("held-mismatch"): at quiescence nothing is merely held. Decided only
//     when quiesce says every saga ended and every accepted order has a
//     final state; otherwise unknown.
//
// Invariant, on money (world gateway effects, final order states): for each
// order, Σ succeeded non-replay charges − Σ succeeded non-replay refunds =
// its total if it ended spec.Success, else 0 ("money-mismatch"); summed
// over orders this is "money at the gateway = approved totals", but per
// order it also names the culprit. Orders with money and no terminal final
// state make it unknown.
func checkConservation(ix *Index, b *builder) {
	spec := ix.Spec
	if s := ix.badIn("effect", "state:order", "state:stock", "harness:"); s != "" {
		b.unknown("%s", s)
	}
	// stock
	stockOK := ix.StockSnap == nil || ix.StockSnap.Complete
	if !stockOK {
		b.unknown("stock query incomplete: %s", ix.StockSnap.Error)
	}
	for _, sku := range ix.StockSKUs {
		s := ix.Stock[sku]
		if s.Available < 0 || s.Reserved < 0 {
			b.flag("negative-stock", "", fmt.Sprintf("%s: available %d, reserved %d", sku, s.Available, s.Reserved), s.Op)
		}
	}
	if ix.Initial == nil {
		if len(ix.Stock) > 0 {
			b.unknown("no initial-stock op: cannot check stock conservation")
		}
	} else {
		skus := make([]string, 0, len(ix.Initial.Stock))
		for sku := range ix.Initial.Stock {
			skus = append(skus, sku)
		}
		for _, sku := range ix.StockSKUs {
			if _, ok := ix.Initial.Stock[sku]; !ok {
				skus = append(skus, sku)
			}
		}
		sort.Strings(skus)
		held, heldOps, heldKnown := heldByApproved(ix)
		for _, sku := range skus {
			s, ok := ix.Stock[sku]
			if !ok && !stockOK {
				continue
			}
			if !ok {
				b.unknown("no final stock for %s", sku)
				continue
			}
			init := ix.Initial.Stock[sku]
			if s.Available+s.Reserved != init {
				b.flag("stock-not-conserved", "", fmt.Sprintf("%s: initial %d ≠ available %d + reserved %d", sku, init, s.Available, s.Reserved), ix.InitialOp, s.Op)
				continue
			}
			if heldKnown == "" && s.Reserved != held[sku] {
				b.flag("held-mismatch", "", fmt.Sprintf("%s: reserved %d but orders ended %s hold %d", sku, s.Reserved, spec.Success, held[sku]), append([]int64{ix.InitialOp, s.Op, ix.QuiesceOp}, heldOps[sku]...)...)
			}
		}
		if heldKnown != "" && len(ix.Stock) > 0 {
			b.unknown("reserved stock not compared with approved orders: %s", heldKnown)
		}
	}
	// money
	var charged, expected int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		var net int64
		var ops []int64
		for _, n := range o.Effects {
			e := &ix.Effects[n]
			if e.Replay || e.Proc != models.ProcGateway || e.Status != models.ChargeSucceeded {
				continue
			}
			switch e.F {
			case models.FCharge:
				net += e.Amount
			case models.FRefund:
				net -= e.Amount
			default:
				continue
			}
			ops = append(ops, e.Op)
		}
		charged += net
		if o.FinalOp < 0 || !spec.Terminal(o.Final.Status) {
			if net != 0 {
				b.unknown("order %s moved money but has no terminal final state", id)
			}
			continue
		}
		var want int64
		if o.Final.Status == spec.Success {
			want = o.Final.Total
			if req := ix.Request(o); want == 0 && req != nil {
				want = req.Total
			}
			if want == 0 {
				b.unknown("order %s ended %s but its total is not recorded", id, o.Final.Status)
				continue
			}
		}
		expected += want
		if net != want {
			b.flag("money-mismatch", id, fmt.Sprintf("order %s: net %d at the gateway, want %d", o.Final.Status, net, want), append(ops, o.FinalOp)...)
		}
	}
	b.stats["money-net"] = charged
	b.stats["money-expected"] = expected
	b.stats["skus"] = int64(len(ix.Stock))
}

// heldByApproved sums item quantities of orders that ended in success, per
// SKU, with the ops that prove them. It returns a reason when the sum
// cannot be trusted (sagas still in flight, orders without final state).
func heldByApproved(ix *Index) (map[string]int64, map[string][]int64, string) {
	if ix.Quiesce == nil {
		return nil, nil, "no quiesce op"
	}
	if ix.Quiesce.Error != "" {
		return nil, nil, "quiesce could not ask the target: " + ix.Quiesce.Error
	}
	if ix.OrdersSnap != nil && !ix.OrdersSnap.Complete {
		return nil, nil, "order list incomplete"
	}
	if !ix.Quiesce.AllTerminal {
		return nil, nil, "quiesce says sagas were still in flight"
	}
	held := map[string]int64{}
	ops := map[string][]int64{}
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		if o.FinalOp < 0 {
			if len(o.Acks) > 0 {
				return nil, nil, "order " + id + " has no final state"
			}
			continue
		}
		if !ix.Spec.Terminal(o.Final.Status) {
			return nil, nil, "order " + id + " is not terminal"
		}
		if o.Final.Status != ix.Spec.Success {
			continue
		}
		items := o.Final.Items
		if req := ix.Request(o); len(items) == 0 && req != nil {
			items = req.Items
		}
		if len(items) == 0 {
			return nil, nil, "order " + id + " has no items in its final state"
		}
		for _, it := range items {
			held[it.SKU] += int64(it.Qty)
			ops[it.SKU] = append(ops[it.SKU], o.FinalOp)
		}
	}
	return held, ops, ""
}
