package checkers

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/sagachaos/sagachaos/models"
	"pgregory.net/rapid"
)

// This file is a model of a CORRECT order-saga system (the reference
// target's behaviour, DESIGN §4) that writes histories the way the harness
// does, with the nondeterminism at-least-once delivery and faults make
// legal: interleaved orders, duplicate publishes (relay crash after publish,
// produce retried after a lost ack), gateway/carrier/mailer replays after an
// ambiguous answer, client timeouts with and without a retry, refused and
// never-arrived requests, late replies, step timeouts that compensate before
// the step ran (the null-compensation tombstone), nemesis crash/restart ops.
// Plan bugs plant one defect consistently, for corruption tests.

// chooser is the randomness the generator needs: rapid in properties, a
// seeded PCG for fixtures and benchmarks.
type chooser interface {
	intn(n int) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return rapid.IntRange(0, n-1).Draw(c.t, "c")
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}

func newRand(seed uint64) randChooser {
	return randChooser{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Client outcomes of a plan.
const (
	clientOK          = "ok"
	clientDouble      = "double-submit"
	clientTimeoutMade = "timeout-created"
	clientTimeoutOK   = "timeout-retry"
	clientLateReply   = "late-reply"
	clientNeverArrive = "timeout-never-arrived"
	clientRefused     = "refused"
)

var clientModes = []string{clientOK, clientDouble, clientTimeoutMade, clientTimeoutOK, clientLateReply, clientNeverArrive, clientRefused}

// Plan bugs: a defect planted consistently through the whole history.
const (
	bugNone               = ""
	bugHangingReserve     = "hanging-reserve"           // release applied before a late reserve, which is then applied
	bugEmailBeforePivot   = "email-before-pivot"        // confirmation e-mail sent before the charge
	bugCompensateAfterPiv = "compensate-after-pivot"    // delivery failure refunds instead of retrying
	bugOutOfOrderComp     = "out-of-order-compensation" // a release before the reserve leaves no tombstone; the late reserve holds stock
)

// plan is one order's fate.
type plan struct {
	n       int
	id, key string
	items   []models.Item
	total   int64
	decline bool
	client  string
	// variants of legal behaviour
	ambiguousCharge, replayShip, replayEmail, stepTimeout bool
	bug                                                   string
	// noDup: the relay never publishes this order's records twice (keeps
	// corruptions of its log exact)
	noDup bool
	// dupAll: every record of this order is published twice, once at
	// once and once later (relay crash-restart loops)
	dupAll bool
	// note: the orders service also publishes an OrderNoted, a type no
	// consumer handles (consumers skip it without an applied record)
	note bool
	// decided by stock at generation time
	reserved bool
}

func (p *plan) created() bool { return p.client != clientNeverArrive && p.client != clientRefused }

// world is the state of the modelled system while a history is written.
type world struct {
	ops      []models.Op
	ch       chooser
	logs     map[partKey][]logRec
	parts    []partKey
	rows     map[string][]rowRec // db -> rows
	dbs      []string
	seq      map[string]int64 // source/order -> last seq
	pos      map[string]int64 // consumer -> last position
	applied  []appliedRec
	finals   map[string]models.OrderState
	pendDups []logRec
	effectN  int
	noDup    map[string]bool
	dupAll   map[string]bool
	// clock is the history time of the next op (ns); the observer's waits
	// advance it by seconds.
	clock int64
}

// The model's target: what its `target` op declares. Consumers are the
// services that consume (each applies only the types it handles; the
// orders topic also carries OrderCreated, OrderApproved and OrderCancelled,
// which nobody handles), relays publish the outboxes.
var (
	modelRelays    = []string{"relay-1", "relay-2"}
	modelInstances = []string{"orders", "inventory", "payment", "delivery", "relay-1", "relay-2"}
	modelConsumers = []models.ConsumerDecl{
		{Process: "orders", Instances: []string{"orders"}, Consumer: "orders", Group: "orders", Topics: []string{"inventory", "payment", "delivery"},
			Types: []string{"StockReserved", "StockRejected", "StockReleased", "StockNotReserved", "PaymentCharged", "PaymentDeclined", "PaymentRefunded", "DeliveryScheduled"}},
		{Process: "inventory", Instances: []string{"inventory"}, Consumer: "inventory", Group: "inventory", Topics: []string{"orders", "orders-compensation"},
			Types: []string{"ReserveStock", "ReleaseStock"}},
		{Process: "payment", Instances: []string{"payment"}, Consumer: "payment", Group: "payment", Topics: []string{"orders"}, Types: []string{"ChargePayment"}},
		{Process: "delivery", Instances: []string{"delivery"}, Consumer: "delivery", Group: "delivery", Topics: []string{"orders"}, Types: []string{"ScheduleDelivery"}},
	}
)

// Timing of the model's observer (history ns).
const (
	modelStepTimeoutMS = 2000
	modelStuckAfterMS  = 3 * modelStepTimeoutMS
	modelSettleMS      = 2000
)

// life records a component lifecycle op of instance.
func (w *world) life(f, inst string, inc int) {
	w.add(models.ProcComponentPrefix+inst, models.Info, f, "", models.ComponentEvent{Instance: inst, Incarnation: inc})
}

type partKey struct {
	topic string
	p     int32
}

type logRec struct {
	typ, order string
	rec        models.EventRecord
}

type rowRec struct {
	order string
	row   models.OutboxRow
}

type appliedRec struct {
	order string
	a     models.Applied
}

func (w *world) add(proc string, typ models.OpType, f, order string, v any) int {
	var raw json.RawMessage
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		raw = b
	}
	w.ops = append(w.ops, models.Op{I: int64(len(w.ops)), T: w.clock, Proc: proc, Type: typ, F: f, Order: order, Value: raw})
	w.clock += 1000
	return len(w.ops) - 1
}

func partition(order string) int32 {
	h := fnv.New32a()
	h.Write([]byte(order))
	return int32(h.Sum32() % 2)
}

// publish commits an outbox row and appends its record to the log; with
// some chance the relay publishes it again now or later (crash after
// publish, lost produce ack).
func (w *world) publish(source, order, typ string) logRec {
	return w.publishTo(source, source, order, typ)
}

// publishTo publishes to a topic other than the source's own.
func (w *world) publishTo(source, topic, order, typ string) logRec {
	k := source + "/" + order
	w.seq[k]++
	seq := w.seq[k]
	id := fmt.Sprintf("%s-%s-%d", source, order, seq)
	if _, ok := w.rows[source]; !ok {
		w.dbs = append(w.dbs, source)
	}
	w.rows[source] = append(w.rows[source], rowRec{order, models.OutboxRow{DB: source, ID: int64(len(w.rows[source]) + 1), EventID: id, Seq: seq, Type: typ, Topic: topic, Published: true}})
	r := logRec{typ, order, models.EventRecord{Topic: topic, Partition: partition(order), Key: order, EventID: id, Seq: seq, Source: source}}
	w.append(r)
	if w.noDup[order] {
		return r
	}
	if w.dupAll[order] {
		w.append(r)
		w.pendDups = append(w.pendDups, r)
		return r
	}
	switch w.ch.intn(8) {
	case 0:
		w.append(r)
	case 1:
		w.pendDups = append(w.pendDups, r)
	}
	return r
}

func (w *world) append(r logRec) {
	k := partKey{r.rec.Topic, r.rec.Partition}
	if _, ok := w.logs[k]; !ok {
		w.parts = append(w.parts, k)
	}
	r.rec.Offset = int64(len(w.logs[k]))
	w.logs[k] = append(w.logs[k], r)
}

// consume records that consumer applied r (its processed-message row).
func (w *world) consume(consumer string, r logRec) {
	w.pos[consumer]++
	w.applied = append(w.applied, appliedRec{r.order, models.Applied{Consumer: consumer, EventID: r.rec.EventID, Source: r.rec.Source, Type: r.typ, Seq: r.rec.Seq, Position: w.pos[consumer]}})
}

func (w *world) effect(proc, f, order string, v any) int {
	w.effectN++
	return w.add(proc, models.Effect, f, order, v)
}

// step is one atomic piece of an order's life; it may spawn a new track.
type step func() []step

// genHistory writes the history of a correct run (plus any plan bugs).
func genHistory(ch chooser, stock map[string]int64, plans []*plan) (*models.History, map[string]*plan) {
	w := &world{ch: ch, logs: map[partKey][]logRec{}, rows: map[string][]rowRec{}, seq: map[string]int64{}, pos: map[string]int64{}, finals: map[string]models.OrderState{}, noDup: map[string]bool{}, dupAll: map[string]bool{}}
	// the observer snapshots every database's outbox, even an empty one
	w.dbs = []string{"orders", "inventory", "payment", "delivery"}
	for _, db := range w.dbs {
		w.rows[db] = nil
	}
	for _, p := range plans {
		w.noDup[p.id] = p.noDup
		w.dupAll[p.id] = p.dupAll
	}
	w.add(models.ProcHarness, models.Info, models.FRunStart, "", models.RunInfo{ID: "gen", Target: "model", Scenario: "generated", Seed: 1})
	w.add(models.ProcHarness, models.Info, models.FTarget, "", models.TargetDecl{Name: "model", Consumers: modelConsumers, Relays: modelRelays, Instances: modelInstances})
	w.add(models.ProcHarness, models.Info, models.FInitStock, "", models.InitialStock{Stock: stock})
	incarnation := map[string]int{}
	for _, in := range modelInstances {
		incarnation[in] = 1
		w.life(models.FComponentStart, in, 1)
	}
	for _, in := range modelInstances {
		w.life(models.FComponentHealthy, in, 1)
	}
	avail := map[string]int64{}
	held := map[string]int64{}
	for k, v := range stock {
		avail[k] = v
	}
	byID := map[string]*plan{}
	// Reservations are decided in plan order; any order is consistent.
	for _, p := range plans {
		byID[p.id] = p
		if !p.created() {
			continue
		}
		late := p.bug == bugHangingReserve || p.bug == bugOutOfOrderComp
		ok := !late && !p.stepTimeout
		for _, it := range p.items {
			ok = ok && avail[it.SKU] >= int64(it.Qty)
		}
		p.reserved = ok
		approve := ok && !p.decline && p.bug != bugCompensateAfterPiv
		for _, it := range p.items {
			if ok && approve {
				avail[it.SKU] -= int64(it.Qty)
				held[it.SKU] += int64(it.Qty)
			}
			if late && avail[it.SKU] >= int64(it.Qty) {
				// the hanging reservation really holds stock
				avail[it.SKU] -= int64(it.Qty)
				held[it.SKU] += int64(it.Qty)
			}
		}
	}
	var tracks [][]step
	for _, p := range plans {
		tracks = append(tracks, w.orderTrack(p))
	}
	for len(tracks) > 0 {
		i := ch.intn(len(tracks))
		s := tracks[i][0]
		tracks[i] = tracks[i][1:]
		if len(tracks[i]) == 0 {
			tracks[i] = tracks[len(tracks)-1]
			tracks = tracks[:len(tracks)-1]
		}
		if spawn := s(); len(spawn) > 0 {
			tracks = append(tracks, spawn)
		}
		if len(w.pendDups) > 0 && ch.intn(4) == 0 {
			j := ch.intn(len(w.pendDups))
			w.append(w.pendDups[j])
			w.pendDups = slices.Delete(w.pendDups, j, j+1)
		}
		if ch.intn(30) == 0 {
			w.add(models.ProcNemesis, models.Info, "kill", "", models.FaultRecord{ID: fmt.Sprintf("f%d", len(w.ops)), Kind: "kill", Phase: models.PhaseInstant, Target: "relay-1"})
			w.life(models.FComponentExit, "relay-1", incarnation["relay-1"])
			incarnation["relay-1"]++
			w.life(models.FComponentStart, "relay-1", incarnation["relay-1"])
			w.life(models.FComponentHealthy, "relay-1", incarnation["relay-1"])
		}
	}
	for _, r := range w.pendDups {
		w.append(r)
	}
	// heal; a relay may die by itself after heal and come back (the drain
	// watch then starts once it is healthy again)
	w.add(models.ProcHarness, models.Info, models.FPhase, "", models.Phase{Name: "heal"})
	w.add(models.ProcHarness, models.Info, models.FHealed, "", models.Healed{Healthy: modelInstances})
	if ch.intn(4) == 0 {
		w.clock += 300e6
		w.life(models.FComponentExit, "relay-2", incarnation["relay-2"])
		incarnation["relay-2"]++
		w.clock += 200e6
		w.life(models.FComponentStart, "relay-2", incarnation["relay-2"])
		w.life(models.FComponentHealthy, "relay-2", incarnation["relay-2"])
	}
	// observation after quiescence
	w.add(models.ProcHarness, models.Info, models.FPhase, "", models.Phase{Name: "quiesce"})
	fromT := w.clock
	w.clock += 800e6
	w.add(models.ProcObserver, models.State, models.FQuiesce, "", models.Quiesce{AllTerminal: true, WaitedMS: 800, DeadlineMS: 90000,
		StepTimeoutMS: modelStepTimeoutMS, StuckAfterMS: modelStuckAfterMS, FromT: fromT, CheckedT: w.clock - 1000})
	w.add(models.ProcHarness, models.Info, models.FPhase, "", models.Phase{Name: "observe"})
	plan := []string{models.SnapKafka, models.SnapOrders, models.SnapStock}
	for _, db := range w.dbs {
		plan = append(plan, models.SnapDrainPfx+db, models.SnapOutboxPfx+db)
	}
	for _, c := range modelConsumers {
		plan = append(plan, models.SnapOffsetPfx+c.Group, models.SnapApplied+c.Consumer)
	}
	w.add(models.ProcObserver, models.State, models.FObservePlan, "", models.ObservePlan{Snapshots: plan})
	drainFrom := w.clock
	w.clock += 600e6
	for _, db := range w.dbs {
		w.add(models.ProcObserver, models.State, models.FOutboxDrain, "", models.OutboxDrain{DB: db, SettleMS: modelSettleMS,
			FromT: drainFrom, ToT: w.clock, Polls: 6, IdleSinceT: drainFrom, Drained: true})
	}
	for _, c := range modelConsumers {
		co := models.ConsumerOffsets{Group: c.Group, Consumer: c.Consumer, LagFree: true, WaitedMS: 5}
		for _, k := range w.parts {
			if slices.Contains(c.Topics, k.topic) {
				n := int64(len(w.logs[k]))
				co.Partitions = append(co.Partitions, models.PartitionOffset{Topic: k.topic, Partition: k.p, Committed: n, End: n})
			}
		}
		w.add(models.ProcObserver, models.State, models.FConsumerOffsets, "", co)
	}
	var ids []string
	for _, p := range plans {
		if p.created() {
			ids = append(ids, p.id)
		}
	}
	for i := len(ids) - 1; i > 0; i-- {
		j := ch.intn(i + 1)
		ids[i], ids[j] = ids[j], ids[i]
	}
	for _, id := range ids {
		w.add(models.ProcObserver, models.State, models.FOrderState, id, w.finals[id])
	}
	w.add(models.ProcObserver, models.State, models.FOrdersSnapshot, "", models.Snapshot{Rows: len(ids), Complete: true})
	skus := make([]string, 0, len(stock))
	for k := range stock {
		skus = append(skus, k)
	}
	slices.Sort(skus)
	for _, k := range skus {
		w.add(models.ProcObserver, models.State, models.FStockState, "", models.StockState{SKU: k, Available: avail[k], Reserved: held[k]})
	}
	w.add(models.ProcObserver, models.State, models.FStockSnapshot, "", models.Snapshot{Rows: len(skus), Complete: true})
	for _, db := range w.dbs {
		for _, r := range w.rows[db] {
			w.add(models.ProcObserver, models.State, models.FOutboxRow, r.order, r.row)
		}
		w.add(models.ProcObserver, models.State, models.FOutboxSnapshot, "", models.OutboxSnapshot{DB: db, Rows: len(w.rows[db]), Complete: true})
	}
	for _, c := range modelConsumers { // one inbox per consumer's database
		n := 0
		for _, a := range w.applied {
			if a.a.Consumer == c.Consumer {
				w.add(models.ProcObserver, models.State, models.FApplied, a.order, a.a)
				n++
			}
		}
		w.add(models.ProcObserver, models.State, models.FAppliedSnapshot, "", models.Snapshot{DB: c.Consumer, Rows: n, Complete: true})
	}
	var topics []string
	n := 0
	for _, k := range w.parts {
		if !slices.Contains(topics, k.topic) {
			topics = append(topics, k.topic)
		}
		for _, r := range w.logs[k] {
			w.add(models.ProcObserver, models.Event, r.typ, r.order, r.rec)
			n++
		}
	}
	w.add(models.ProcObserver, models.State, models.FKafkaSnapshot, "", models.KafkaSnapshot{Topics: topics, Records: n, Complete: true})
	w.add(models.ProcHarness, models.Info, models.FRunEnd, "", map[string]int{"elapsed_ms": 1})
	return &models.History{Header: models.Header{Format: models.HistoryFormat, Version: models.HistoryVersion, Run: "gen"}, Ops: w.ops}, byID
}

// orderTrack is one order's life as a sequence of steps.
func (w *world) orderTrack(p *plan) []step {
	proc := fmt.Sprintf("client-%d", p.n)
	req := models.PlaceOrder{Key: p.key, Customer: "c-" + p.id, Items: p.items, Card: "tok_visa", Total: p.total, Attempt: 1}
	if p.decline {
		req.Card = "tok_decline"
	}
	invoke := func(attempt int) step {
		return func() []step {
			r := req
			r.Attempt = attempt
			w.add(proc, models.Invoke, models.FPlaceOrder, "", r)
			return nil
		}
	}
	ok := func(replayed bool) step {
		return func() []step {
			w.add(proc, models.Ok, models.FPlaceOrder, p.id, models.PlaceOrderReply{Key: p.key, Status: 202, Order: p.id, Replayed: replayed})
			return nil
		}
	}
	info := func() step {
		return func() []step {
			w.add(proc, models.Info, models.FPlaceOrder, "", models.ClientFailure{Key: p.key, Error: "context deadline exceeded"})
			return nil
		}
	}
	// the client's side after the order was created runs as its own track
	var reply []step
	switch p.client {
	case clientOK:
		reply = []step{ok(false)}
	case clientDouble:
		reply = []step{ok(false), invoke(2), ok(true)}
	case clientTimeoutMade:
		reply = []step{info()}
	case clientTimeoutOK:
		reply = []step{info(), invoke(2), ok(true)}
	case clientLateReply:
		reply = []step{info(), ok(false)}
	case clientNeverArrive:
		return []step{invoke(1), info()}
	case clientRefused:
		return []step{invoke(1), func() []step {
			w.add(proc, models.Fail, models.FPlaceOrder, "", models.ClientFailure{Key: p.key, Status: 400, Code: "bad_request", Error: "no items"})
			return nil
		}}
	}
	final := models.OrderState{IdempotencyKey: p.key, Customer: req.Customer, Items: p.items, Card: req.Card, Total: p.total}
	finish := func(status string) {
		final.Status = status
		w.finals[p.id] = final
	}
	id := p.id
	create := func() []step {
		w.publish("orders", id, "OrderCreated")
		if p.note {
			w.publish("orders", id, "OrderNoted")
		}
		return reply
	}
	charge := func() int {
		ce := models.ChargeEffect{ChargeID: "ch-" + id, Amount: p.total, Card: req.Card, IdempotencyKey: "pay-" + id, Status: models.ChargeSucceeded}
		if p.decline {
			ce.Status = models.ChargeDeclined
		}
		if p.ambiguousCharge {
			ce.Ambiguous = "500"
		}
		i := w.effect(models.ProcGateway, models.FCharge, id, ce)
		if p.ambiguousCharge {
			ce.Ambiguous, ce.Replay = "", true
			w.effect(models.ProcGateway, models.FCharge, id, ce)
		}
		return i
	}
	email := func() {
		e := models.EmailEffect{EmailID: "em-" + id, Kind: "confirmation", To: req.Customer, IdempotencyKey: "mail-" + id}
		w.effect(models.ProcMailer, models.FEmail, id, e)
		if p.replayEmail {
			e.Replay = true
			w.effect(models.ProcMailer, models.FEmail, id, e)
		}
	}
	var cmdReserve, evStock, cmdCharge, evPay, cmdShip, evShip, cmdRelease, evReleased, evRefund logRec
	steps := []step{invoke(1), create,
		func() []step { cmdReserve = w.publish("orders", id, "ReserveStock"); return nil },
	}
	switch {
	case p.stepTimeout || p.bug == bugHangingReserve || p.bug == bugOutOfOrderComp:
		// the orchestrator times out waiting for the reservation and
		// compensates before the inventory saw the reserve command
		steps = append(steps,
			// compensations travel their own topic, so the inventory may
			// see the release before the reserve without breaking order
			func() []step {
				cmdRelease = w.publishTo("orders", "orders-compensation", id, "ReleaseStock")
				return nil
			},
			func() []step {
				w.consume("inventory", cmdRelease)
				if p.bug == bugOutOfOrderComp {
					evReleased = w.publish("inventory", id, "StockNotReserved")
				} else {
					evReleased = w.publish("inventory", id, "StockReleased")
				}
				return nil
			},
			func() []step {
				w.consume("inventory", cmdReserve)
				if p.bug == bugHangingReserve || p.bug == bugOutOfOrderComp {
					evStock = w.publish("inventory", id, "StockReserved") // the bug
				} else {
					evStock = w.publish("inventory", id, "StockRejected") // tombstone
				}
				return nil
			},
			func() []step {
				w.consume("orders", evReleased)
				w.consume("orders", evStock)
				w.publish("orders", id, "OrderCancelled")
				finish(models.StatusCancelled)
				return nil
			})
		return steps
	}
	steps = append(steps, func() []step {
		w.consume("inventory", cmdReserve)
		if p.reserved {
			evStock = w.publish("inventory", id, "StockReserved")
		} else {
			evStock = w.publish("inventory", id, "StockRejected")
		}
		return nil
	})
	if !p.reserved {
		return append(steps, func() []step {
			w.consume("orders", evStock)
			w.publish("orders", id, "OrderCancelled")
			finish(models.StatusCancelled)
			return nil
		})
	}
	steps = append(steps,
		func() []step {
			w.consume("orders", evStock)
			if p.bug == bugEmailBeforePivot {
				email()
			}
			cmdCharge = w.publish("orders", id, "ChargePayment")
			return nil
		},
		func() []step {
			w.consume("payment", cmdCharge)
			charge()
			if p.decline {
				evPay = w.publish("payment", id, "PaymentDeclined")
			} else {
				evPay = w.publish("payment", id, "PaymentCharged")
			}
			return nil
		})
	compensate := func(refund bool) []step {
		s := []step{}
		if refund {
			s = append(s, func() []step {
				w.effect(models.ProcGateway, models.FRefund, id, models.RefundEffect{RefundID: "re-" + id, ChargeID: "ch-" + id, Amount: p.total, Status: "succeeded"})
				evRefund = w.publish("payment", id, "PaymentRefunded")
				return nil
			})
		}
		return append(s,
			func() []step {
				if refund {
					w.consume("orders", evRefund)
				}
				cmdRelease = w.publish("orders", id, "ReleaseStock")
				return nil
			},
			func() []step {
				w.consume("inventory", cmdRelease)
				evReleased = w.publish("inventory", id, "StockReleased")
				return nil
			},
			func() []step {
				w.consume("orders", evReleased)
				w.publish("orders", id, "OrderCancelled")
				finish(models.StatusCancelled)
				return nil
			})
	}
	if p.decline {
		return append(steps, append([]step{func() []step { w.consume("orders", evPay); return nil }}, compensate(false)...)...)
	}
	steps = append(steps,
		func() []step {
			w.consume("orders", evPay)
			cmdShip = w.publish("orders", id, "ScheduleDelivery")
			return nil
		})
	if p.bug == bugCompensateAfterPiv {
		return append(steps, append([]step{func() []step { w.consume("delivery", cmdShip); return nil }}, compensate(true)...)...)
	}
	return append(steps,
		func() []step {
			w.consume("delivery", cmdShip)
			s := models.ShipmentEffect{ShipmentID: "sh-" + id, IdempotencyKey: "ship-" + id}
			w.effect(models.ProcCarrier, models.FShipment, id, s)
			if p.replayShip {
				s.Replay = true
				w.effect(models.ProcCarrier, models.FShipment, id, s)
			}
			evShip = w.publish("delivery", id, "DeliveryScheduled")
			return nil
		},
		func() []step {
			w.consume("orders", evShip)
			if p.bug != bugEmailBeforePivot {
				email()
			}
			w.publish("orders", id, "OrderApproved")
			finish(models.StatusApproved)
			return nil
		})
}

// randomPlans draws n order plans and an initial stock.
func randomPlans(ch chooser, n int) (map[string]int64, []*plan) {
	skus := []string{"sku-1", "sku-2", "sku-3"}
	stock := map[string]int64{}
	for _, s := range skus {
		stock[s] = int64(ch.intn(8))
	}
	var plans []*plan
	for i := 0; i < n; i++ {
		p := &plan{n: i, id: fmt.Sprintf("o-%d", i), key: fmt.Sprintf("k-%d", i)}
		for j, m := 0, 1+ch.intn(2); j < m; j++ {
			sku := skus[ch.intn(len(skus))]
			if !slices.ContainsFunc(p.items, func(it models.Item) bool { return it.SKU == sku }) {
				p.items = append(p.items, models.Item{SKU: sku, Qty: 1 + ch.intn(3)})
			}
		}
		p.total = int64(100 * (1 + ch.intn(50)))
		p.decline = ch.intn(4) == 0
		p.client = clientModes[ch.intn(len(clientModes))]
		p.ambiguousCharge = ch.intn(4) == 0
		p.replayShip = ch.intn(4) == 0
		p.replayEmail = ch.intn(4) == 0
		p.stepTimeout = ch.intn(8) == 0
		plans = append(plans, p)
	}
	return stock, plans
}
