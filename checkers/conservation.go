package checkers

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/sagachaos/sagachaos/models"
)

// checkConservation is conservation, over the resources the target
// declares (Index.Resources; the order domain's are stock and money).
//
// Invariant, on each counted resource (its initial-resource op, its final
// resource states):
//   - available ≥ 0 and reserved ≥ 0 for every key ("negative-stock");
//   - initial = available + reserved for every key ("stock-not-conserved");
//   - reserved = Σ what the sagas that ended spec.Success hold of that key
//     (HeldBy over their start requests' bodies; "held-mismatch"): at
//     quiescence nothing is merely held. Decided only when quiesce says
//     every saga ended and every accepted saga has a final state;
//     otherwise unknown.
//
// Invariant, on each payments resource (the world effects of its payments
// provider, final states): for each saga, Σ succeeded non-replay charges −
// Σ succeeded non-replay refunds = what it holds (HeldBy's quantity, e.g.
// its total) if it ended spec.Success, else 0 ("money-mismatch"); summed
// over sagas this is "money at the provider = success totals", but per saga
// it also names the culprit. Sagas with money and no terminal final state
// make it unknown.
func checkConservation(ix *Index, b *builder) {
	if s := ix.badIn("effect", "state:order", "state:stock", "state:resource", "harness:"); s != "" {
		b.unknown("%s", s)
	}
	var keys int64
	for _, r := range ix.Resources {
		switch r.Kind {
		case "":
			keys += conserveCounted(ix, b, r)
		case models.ProviderPayments:
			conservePayments(ix, b, r)
		}
	}
	b.stats["resource-keys"] = keys
}

// conserveCounted checks one counted resource; it returns its key count.
func conserveCounted(ix *Index, b *builder, r models.Resource) int64 {
	spec := ix.Spec
	f := ix.Res[r.Name]
	if f == nil {
		f = &ResourceFacts{InitialOp: -1, Final: map[string]StockFact{}}
	}
	finalOK := f.Snap == nil || f.Snap.Complete
	if !finalOK {
		b.unknown("%s query incomplete: %s", r.Name, f.Snap.Error)
	}
	for _, k := range f.Keys {
		s := f.Final[k]
		if s.Available < 0 || s.Reserved < 0 {
			b.flag("negative-stock", "", fmt.Sprintf("%s %s: available %d, reserved %d", r.Name, k, s.Available, s.Reserved), s.Op)
		}
	}
	if f.Initial == nil {
		if len(f.Final) > 0 {
			b.unknown("no initial amounts of %s: cannot check its conservation", r.Name)
		}
		return int64(len(f.Final))
	}
	keys := make([]string, 0, len(f.Initial))
	for k := range f.Initial {
		keys = append(keys, k)
	}
	for _, k := range f.Keys {
		if _, ok := f.Initial[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	held, heldOps, heldKnown := heldBySuccess(ix, r)
	for _, k := range keys {
		s, ok := f.Final[k]
		if !ok && !finalOK {
			continue
		}
		if !ok {
			b.unknown("no final amount of %s %s", r.Name, k)
			continue
		}
		init := f.Initial[k]
		if s.Available+s.Reserved != init {
			b.flag("stock-not-conserved", "", fmt.Sprintf("%s %s: initial %d ≠ available %d + reserved %d", r.Name, k, init, s.Available, s.Reserved), f.InitialOp, s.Op)
			continue
		}
		if heldKnown == "" && s.Reserved != held[k] {
			b.flag("held-mismatch", "", fmt.Sprintf("%s %s: reserved %d but sagas ended %s hold %d", r.Name, k, s.Reserved, spec.Success, held[k]), append([]int64{f.InitialOp, s.Op, ix.QuiesceOp}, heldOps[k]...)...)
		}
	}
	if heldKnown != "" && len(f.Final) > 0 {
		b.unknown("reserved %s not compared with what ended sagas hold: %s", r.Name, heldKnown)
	}
	return int64(len(f.Final))
}

// conservePayments checks money at one payments provider.
func conservePayments(ix *Index, b *builder, r models.Resource) {
	spec := ix.Spec
	var charged, expected int64
	for _, id := range ix.OrderIDs {
		o := ix.Orders[id]
		var net int64
		var ops []int64
		for _, n := range o.Effects {
			e := &ix.Effects[n]
			if e.Replay || e.Proc != r.Proc || e.Status != models.EffectSucceeded {
				continue
			}
			switch e.F {
			case r.Charge:
				net += e.Amount
			case r.Refund:
				net -= e.Amount
			default:
				continue
			}
			ops = append(ops, e.Op)
		}
		charged += net
		if o.FinalOp < 0 || !spec.Terminal(o.Final.Status) {
			if net != 0 {
				b.unknown("saga %s moved money but has no terminal final state", id)
			}
			continue
		}
		var want int64
		if o.Final.Status == spec.Success {
			want = o.Final.Total
			if want == 0 && r.HeldBy != nil {
				if q, ok := pointerInt(ix.RequestBody(o), r.HeldBy.Quantity); ok {
					want = q
				}
			}
			if want == 0 {
				b.unknown("saga %s ended %s but its total is not recorded", id, o.Final.Status)
				continue
			}
		}
		expected += want
		if net != want {
			b.flag("money-mismatch", id, fmt.Sprintf("saga %s: net %d at %s, want %d", o.Final.Status, net, r.Provider, want), append(ops, o.FinalOp)...)
		}
	}
	b.stats["money-net"] += charged
	b.stats["money-expected"] += expected
}

// heldBySuccess sums, per key of counted resource r, what the sagas that
// ended in success hold (r.HeldBy over their start bodies), with the ops
// that prove it. It returns a reason when the sum cannot be trusted (sagas
// still in flight, sagas without a final state or a known request).
func heldBySuccess(ix *Index, r models.Resource) (map[string]int64, map[string][]int64, string) {
	if r.HeldBy == nil {
		return nil, nil, "the resource declares nothing that holds it"
	}
	if ix.Quiesce == nil {
		return nil, nil, "no quiesce op"
	}
	if ix.Quiesce.Error != "" {
		return nil, nil, "quiesce could not ask the target: " + ix.Quiesce.Error
	}
	if ix.OrdersSnap != nil && !ix.OrdersSnap.Complete {
		return nil, nil, "saga list incomplete"
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
				return nil, nil, "saga " + id + " has no final state"
			}
			continue
		}
		if !ix.Spec.Terminal(o.Final.Status) {
			return nil, nil, "saga " + id + " is not terminal"
		}
		if o.Final.Status != ix.Spec.Success {
			continue
		}
		parts, ok := holdings(ix.RequestBody(o), *r.HeldBy)
		if !ok {
			return nil, nil, "saga " + id + " has no known request holding " + r.Name
		}
		for _, p := range parts {
			held[p.key] += p.qty
			ops[p.key] = append(ops[p.key], o.FinalOp)
		}
	}
	return held, ops, ""
}

type heldPart struct {
	key string
	qty int64
}

// holdings reads what a request body holds by h.
func holdings(body any, h models.HeldBy) ([]heldPart, bool) {
	if body == nil {
		return nil, false
	}
	if h.Items == "" {
		q, ok := pointerInt(body, h.Quantity)
		if !ok {
			return nil, false
		}
		key := ""
		if h.Key != "" {
			k, ok := models.Pointer(body, h.Key)
			if key, _ = k.(string); !ok {
				return nil, false
			}
		}
		return []heldPart{{key, q}}, true
	}
	items, ok := models.Pointer(body, h.Items)
	arr, isArr := items.([]any)
	if !ok || !isArr || len(arr) == 0 {
		return nil, false
	}
	var out []heldPart
	for _, el := range arr {
		m, _ := el.(map[string]any)
		k, _ := m[h.Key].(string)
		q, ok := number(m[h.Quantity])
		if k == "" || !ok {
			return nil, false
		}
		out = append(out, heldPart{k, q})
	}
	return out, true
}

func pointerInt(body any, ptr string) (int64, bool) {
	if body == nil {
		return 0, false
	}
	v, ok := models.Pointer(body, ptr)
	if !ok {
		return 0, false
	}
	return number(v)
}

func number(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}
