package checkers

import (
	"encoding/json"
	"slices"

	"github.com/sagachaos/sagachaos/models"
)

// victim is the order every corruption targets; it is added to a generated
// history with a dedicated SKU, so its reservation always succeeds.
const victim = "o-victim"

// twin is a second forced order some corruptions need.
const twin = "o-twin"

// corruption plants one defect into a correct generated history.
type corruption struct {
	name string
	// want is the set of checkers that must find the defect, intended one
	// first. More than one only where the defect breaks several invariants
	// by its nature (a refund of nothing also moves money).
	want []string
	// stockLevel: the intended checker names no order (aggregate stock).
	decline bool
	bug     string
	twin    bool
	mutate  func(ops []models.Op) []models.Op
}

var corruptions = []corruption{
	{name: "stuck", want: []string{"saga-terminates"}, mutate: func(ops []models.Op) []models.Op {
		return editValue(ops, isOp(models.State, models.FOrderState, victim), func(m map[string]any) { m["status"] = models.StatusPending })
	}},
	{name: "missing-shipment", want: []string{"all-or-nothing"}, mutate: func(ops []models.Op) []models.Op {
		return slices.DeleteFunc(ops, isOp(models.Effect, models.FShipment, victim))
	}},
	{name: "email-for-cancelled", want: []string{"all-or-nothing"}, decline: true, mutate: func(ops []models.Op) []models.Op {
		at := slices.IndexFunc(ops, isOp(models.Effect, models.FCharge, victim))
		e := mkOp(models.ProcMailer, models.Effect, models.FEmail, victim, models.EmailEffect{EmailID: "em-x", Kind: "confirmation", To: "c"})
		return slices.Insert(ops, at+1, e)
	}},
	{name: "double-shipment", want: []string{"no-double-effect"}, mutate: func(ops []models.Op) []models.Op {
		at := slices.IndexFunc(ops, isOp(models.Effect, models.FShipment, victim))
		dup := ops[at]
		dup.Value = setField(dup.Value, "replay", false)
		dup.Value = setField(dup.Value, "shipment_id", "sh-again")
		return slices.Insert(ops, at+2, dup)
	}},
	{name: "null-refund", want: []string{"compensation-order", "conservation"}, decline: true, mutate: func(ops []models.Op) []models.Op {
		at := slices.IndexFunc(ops, isOp(models.Effect, models.FCharge, victim))
		r := mkOp(models.ProcGateway, models.Effect, models.FRefund, victim, models.RefundEffect{RefundID: "re-x", ChargeID: "ch-" + victim, Amount: 100, Status: "succeeded"})
		return slices.Insert(ops, at+1, r)
	}},
	{name: "hanging-reserve", want: []string{"compensation-order", "conservation", "all-or-nothing"}, bug: bugHangingReserve},
	{name: "out-of-order-compensation", want: []string{"all-or-nothing", "conservation"}, bug: bugOutOfOrderComp},
	{name: "compensate-after-pivot", want: []string{"pivot"}, bug: bugCompensateAfterPiv},
	{name: "email-before-pivot", want: []string{"pivot"}, bug: bugEmailBeforePivot},
	{name: "lost-event", want: []string{"no-lost-event"}, mutate: func(ops []models.Op) []models.Op {
		return slices.DeleteFunc(ops, func(o models.Op) bool { return o.Type == models.Event && o.F == "OrderApproved" && o.Order == victim })
	}},
	{name: "phantom-event", want: []string{"no-phantom-event"}, mutate: func(ops []models.Op) []models.Op {
		return slices.DeleteFunc(ops, func(o models.Op) bool {
			return isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == "OrderApproved"
		})
	}},
	{name: "reordered-log", want: []string{"per-aggregate-order"}, mutate: func(ops []models.Op) []models.Op {
		a := slices.IndexFunc(ops, func(o models.Op) bool { return o.Type == models.Event && o.F == "ChargePayment" && o.Order == victim })
		b := slices.IndexFunc(ops, func(o models.Op) bool {
			return o.Type == models.Event && o.F == "ScheduleDelivery" && o.Order == victim
		})
		oa, ob := decodeMap(ops[a].Value)["offset"], decodeMap(ops[b].Value)["offset"]
		ops[a].Value = setField(ops[a].Value, "offset", ob)
		ops[b].Value = setField(ops[b].Value, "offset", oa)
		return ops
	}},
	{name: "applied-out-of-order", want: []string{"per-aggregate-order"}, decline: true, mutate: func(ops []models.Op) []models.Op {
		pick := func(typ string) int {
			return slices.IndexFunc(ops, func(o models.Op) bool {
				m := decodeMap(o.Value)
				return isOp(models.State, models.FApplied, victim)(o) && m["consumer"] == "orders" && m["type"] == typ
			})
		}
		a, b := pick("StockReserved"), pick("StockReleased")
		pa, pb := decodeMap(ops[a].Value)["position"], decodeMap(ops[b].Value)["position"]
		ops[a].Value = setField(ops[a].Value, "position", pb)
		ops[b].Value = setField(ops[b].Value, "position", pa)
		return ops
	}},
	{name: "unkeyed-record", want: []string{"per-aggregate-order"}, mutate: func(ops []models.Op) []models.Op {
		return editValue(ops, func(o models.Op) bool {
			return o.Type == models.Event && o.F == "DeliveryScheduled" && o.Order == victim
		},
			func(m map[string]any) { m["key"] = "" })
	}},
	{name: "double-charge", want: []string{"no-double-effect", "conservation"}, mutate: func(ops []models.Op) []models.Op {
		at := slices.IndexFunc(ops, isOp(models.Effect, models.FCharge, victim))
		dup := ops[at]
		dup.Value = setField(dup.Value, "replay", false)
		dup.Value = setField(dup.Value, "charge_id", "ch-again")
		return slices.Insert(ops, at+1, dup)
	}},
	{name: "wrong-amount", want: []string{"conservation"}, mutate: func(ops []models.Op) []models.Op {
		return editValue(ops, isOp(models.Effect, models.FCharge, victim), func(m map[string]any) { m["amount"] = m["amount"].(float64) + 1 })
	}},
	{name: "key-reused", want: []string{"client-idempotency"}, twin: true, mutate: func(ops []models.Op) []models.Op {
		return editValue(ops, isOp(models.State, models.FOrderState, victim), func(m map[string]any) { m["idempotency_key"] = "k-twin" })
	}},
	// The inventory committed past the victim's ReserveStock without
	// applying it (an at-most-once consumer).
	{name: "lost-delivery", want: []string{"no-lost-delivery"}, mutate: func(ops []models.Op) []models.Op {
		return slices.DeleteFunc(ops, func(o models.Op) bool {
			m := decodeMap(o.Value)
			return isOp(models.State, models.FApplied, victim)(o) && m["consumer"] == "inventory" && m["type"] == "ReserveStock"
		})
	}},
	// The victim's OrderApproved stays unpublished through the whole drain
	// watch, with every relay healthy and the outbox idle.
	{name: "stuck-row", want: []string{"outbox-drains"}, mutate: func(ops []models.Op) []models.Op {
		return unpublish(ops, "OrderApproved", func(d map[string]any) float64 {
			d["to_t"] = d["from_t"].(float64) + 2.5e9
			return d["from_t"].(float64)
		})
	}},
	// The victim's ChargePayment is committed and not in the log, while its
	// ScheduleDelivery (higher seq, same topic) is; the drain watch saw it
	// only at its last poll, so outbox-drains cannot say it is stuck.
	{name: "seq-gap", want: []string{"per-aggregate-order"}, mutate: func(ops []models.Op) []models.Op {
		return unpublish(ops, "ChargePayment", func(d map[string]any) float64 { return d["to_t"].(float64) })
	}},
	// The victim's OrderCreated (seq 1) vanished from the outbox before it
	// was published: seq 2 exists, seq 1 is nowhere.
	{name: "vanished-row", want: []string{"per-aggregate-order"}, mutate: func(ops []models.Op) []models.Op {
		return dropMessage(ops, "OrderCreated")
	}},
	// The victim was approved without announcing it.
	{name: "missing-terminal-event", want: []string{"saga-terminates"}, mutate: func(ops []models.Op) []models.Op {
		return dropMessage(ops, "OrderApproved")
	}},
	// The quiesce stage stopped early: the victim sat PENDING, unchanged,
	// for more than k step timeouts after heal with everything healthy.
	{name: "stuck-proved-early", want: []string{"saga-terminates"}, mutate: func(ops []models.Op) []models.Op {
		return stuckEarly(ops, 6.5e9)
	}},
}

// unpublish marks the victim's row of typ unpublished, removes its records
// from the log and lists it pending in its drain watch, first seen at the
// time window returns (which may also edit the watch).
func unpublish(ops []models.Op, typ string, window func(d map[string]any) float64) []models.Op {
	var row map[string]any
	ops = editValue(ops, func(o models.Op) bool {
		return isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == typ
	}, func(m map[string]any) { m["published"] = false; row = m })
	ops = slices.DeleteFunc(ops, func(o models.Op) bool { return o.Type == models.Event && o.F == typ && o.Order == victim })
	return editValue(ops, func(o models.Op) bool {
		return o.F == models.FOutboxDrain && decodeMap(o.Value)["db"] == row["db"]
	}, func(d map[string]any) {
		d["drained"] = false
		d["pending"] = []any{map[string]any{"id": row["id"], "event_id": row["event_id"], "aggregate": victim, "type": typ, "first_seen_t": window(d)}}
	})
}

// dropMessage removes the victim's outbox row of typ and its records.
func dropMessage(ops []models.Op, typ string) []models.Op {
	return slices.DeleteFunc(ops, func(o models.Op) bool {
		return (o.Type == models.Event && o.F == typ && o.Order == victim) ||
			(isOp(models.State, models.FOutboxRow, victim)(o) && decodeMap(o.Value)["type"] == typ)
	})
}

// stuckEarly makes the victim PENDING at the end and the quiesce stage stop
// early with it unchanged for `for` ns since the watch started.
func stuckEarly(ops []models.Op, watched float64) []models.Op {
	ops = editValue(ops, isOp(models.State, models.FOrderState, victim), func(m map[string]any) {
		m["status"] = models.StatusPending
		m["trail"] = []string{"create-order", "reserve-stock"}
	})
	return editValue(ops, func(o models.Op) bool { return o.F == models.FQuiesce }, func(m map[string]any) {
		from := m["from_t"].(float64)
		m["all_terminal"] = false
		m["pending"] = []string{victim}
		m["early_stop"] = true
		m["checked_t"] = from + watched
		m["sagas"] = []any{map[string]any{"id": victim, "status": models.StatusPending, "trail": []string{"create-order", "reserve-stock"}, "changed_t": from, "rows": 3}}
	})
}

// recount rewrites every closing snapshot's row count to the rows recorded
// before it, as an observer of the corrupted system would have written it.
func recount(ops []models.Op) []models.Op {
	var events, orders, stock, outbox, applied int
	for i := range ops {
		o := &ops[i]
		set := func(field string, n *int) {
			o.Value = setField(o.Value, field, *n)
			*n = 0
		}
		switch {
		case o.Type == models.Event:
			events++
		case o.F == models.FOrderState:
			orders++
		case o.F == models.FStockState:
			stock++
		case o.F == models.FOutboxRow:
			outbox++
		case o.F == models.FApplied:
			applied++
		case o.F == models.FKafkaSnapshot:
			set("records", &events)
		case o.F == models.FOrdersSnapshot:
			set("rows", &orders)
		case o.F == models.FStockSnapshot:
			set("rows", &stock)
		case o.F == models.FOutboxSnapshot:
			set("rows", &outbox)
		case o.F == models.FAppliedSnapshot:
			set("rows", &applied)
		}
	}
	return ops
}

// corrupt generates a correct history with the random plans plus the
// victim (and twin), then plants c.
func corrupt(ch chooser, c corruption, n int) *models.History {
	stock, plans := randomPlans(ch, n)
	stock["sku-victim"] = 1
	v := &plan{n: n, id: victim, key: "k-victim", items: []models.Item{{SKU: "sku-victim", Qty: 1}}, total: 100, decline: c.decline, client: clientOK, bug: c.bug, noDup: true}
	plans = append(plans, v)
	if c.twin {
		stock["sku-twin"] = 1
		plans = append(plans, &plan{n: n + 1, id: twin, key: "k-twin", items: []models.Item{{SKU: "sku-twin", Qty: 1}}, total: 100, client: clientOK, noDup: true})
	}
	h, _ := genHistory(ch, stock, plans)
	if c.mutate != nil {
		h.Ops = renumber(recount(c.mutate(h.Ops)))
	}
	return h
}

func renumber(ops []models.Op) []models.Op {
	for i := range ops {
		ops[i].I = int64(i)
	}
	return ops
}

func isOp(typ models.OpType, f, order string) func(models.Op) bool {
	return func(o models.Op) bool { return o.Type == typ && o.F == f && o.Order == order }
}

func mkOp(proc string, typ models.OpType, f, order string, v any) models.Op {
	b, _ := json.Marshal(v)
	return models.Op{Proc: proc, Type: typ, F: f, Order: order, Value: b}
}

func decodeMap(raw json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func setField(raw json.RawMessage, k string, v any) json.RawMessage {
	m := decodeMap(raw)
	m[k] = v
	b, _ := json.Marshal(m)
	return b
}

// editValue edits the value of every op matching sel.
func editValue(ops []models.Op, sel func(models.Op) bool, edit func(map[string]any)) []models.Op {
	for i := range ops {
		if sel(ops[i]) {
			m := decodeMap(ops[i].Value)
			edit(m)
			ops[i].Value, _ = json.Marshal(m)
		}
	}
	return ops
}
