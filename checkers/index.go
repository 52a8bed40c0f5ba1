package checkers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sagachaos/sagachaos/models"
)

// Index is a history digested once for every checker: per order its client
// ops, its world effects sorted by the spec action they match, its events
// and its final state; per SKU its stock; the outbox rows and snapshots; the
// applied records; the harness's own observations. Building it is one pass
// over the ops; every checker then runs in time linear in what it reads.
//
// An Index is read-only once built and may be shared by checkers running
// concurrently.
type Index struct {
	Spec models.SagaSpec
	// Ops is the history's ops (not copied).
	Ops []models.Op

	// Orders by id; OrderIDs in order of first appearance (the stable
	// order violations are reported in).
	Orders   map[string]*OrderFacts
	OrderIDs []string
	// Keys by Idempotency-Key; KeyIDs in order of first appearance.
	Keys   map[string]*KeyFacts
	KeyIDs []string
	// OrderStates counts observer order-state ops; zero means the observer
	// never reported final states.
	OrderStates int

	Effects []EffectFact
	// EffectsWithoutOrder counts world effects that name no order and could
	// not be attributed to one (a refund is attributed through its charge).
	EffectsWithoutOrder int

	Events []EventFact
	// EventsByID maps an event_id to the index in Events of one of its
	// records (the last; duplicates share the id, key and so partition).
	EventsByID map[string]int32
	KafkaSnap  *models.KafkaSnapshot
	KafkaOp    int64

	Rows []RowFact
	// RowsByEvent maps an event_id to the index in Rows of a row with it.
	RowsByEvent map[string]int32
	// OutboxSnaps by database.
	OutboxSnaps map[string]SnapFact

	Applied []AppliedFact

	Stock     map[string]StockFact
	StockSKUs []string
	Initial   *models.InitialStock
	InitialOp int64

	Quiesce   *models.Quiesce
	QuiesceOp int64
	// Snapshots closing the order list, the stock query and the applied
	// queries (nil: the history predates them or the observer never got
	// there). An incomplete one means its observation is not evidence.
	OrdersSnap, StockSnap *SnapFact
	AppliedSnaps          []SnapFact
	Run                   *models.RunInfo
	// Interrupted is set when the harness recorded an interrupted op.
	Interrupted bool

	// Target is the harness's declaration of what the target consumes and
	// runs (nil: the history predates it); Healed the end of the heal step.
	Target   *models.TargetDecl
	TargetOp int64
	Healed   *models.Healed
	HealedOp int64
	// HealErr is set when an older history's heal phase op says heal failed.
	HealErr string
	// Life is every component lifecycle op (start, healthy, exit) and every
	// crash or restart the nemesis journaled, in history order.
	Life []LifeFact
	// Offsets by consumer group; Drains by outbox database.
	Offsets map[string]OffsetsFact
	Drains  map[string]DrainFact
	// Plan is the observer's list of the snapshots it meant to write.
	Plan   *models.ObservePlan
	PlanOp int64
	// RunEndOp is the run-end op (-1: none: the history is cut off or the
	// run never finished); Truncated says its last line was cut short.
	RunEndOp  int64
	Truncated bool
	// closed lists the snapshot names (models.Snap*) whose closing op is in
	// the history; miscount the closing ops whose row count disagrees with
	// the rows recorded before them.
	closed    map[string]bool
	miscount  []string
	rowsSince struct{ events, orders, stock, resource, outbox, applied int }

	// Bad lists ops whose value could not be decoded, by category
	// ("client", "effect", "event", "state:<f>", "harness:<f>"). A checker
	// that reads a category with bad ops cannot be sure and says unknown.
	Bad map[string][]int64

	// interned names (sources, consumers) and topic-partitions
	names map[string]int32
	parts map[topicPart]int32
	// one-entry caches in front of names and Orders
	nameList  []string
	lastPart  int32
	lastOrder *OrderFacts
	strs      interner
	// PartNames lists the interned topic-partitions by id.
	PartNames []topicPart

	srcDBOnce sync.Once
	srcDB     map[string]string

	// The target's domain as the history declares it (decl.go): NoSaga for
	// an outbox-only target, the resources to conserve, the seq source and
	// the start op's function.
	NoSaga        bool
	Resources     []models.Resource
	SeqFromOutbox bool
	StartOp       string
	// Res holds the counted resources' observations by name (the legacy
	// stock ops feed Res["stock"] too).
	Res map[string]*ResourceFacts

	inLogOnce sync.Once
	rowInLog  []bool

	healthOnce  sync.Once
	healthCache *Health

	// spec-derived lookup tables
	fwdEvent, compEvent map[string]int // event type -> step index
	extraMatch          bool           // spec matches effect fields beyond status/kind
}

// OrderFacts is what the history says about one order.
type OrderFacts struct {
	ID string
	// Num is the order's position in Index.OrderIDs.
	Num int32
	// Acks are ok place-order ops that returned this order.
	Acks []int64
	// InvokeOp is the place-order invoke behind the first ack (-1: not
	// known); Index.Request decodes it.
	InvokeOp int64
	// Final is the observer's last order-state for it; FinalOp is -1 when
	// there is none.
	Final   *models.OrderState
	FinalOp int64
	// Fwd[i] and Comp[i] are the op indices of non-replay world effects that
	// match step i's effect and its compensation's effect, in history order.
	Fwd, Comp [][]int64
	// Effects are indices into Index.Effects (all of the order's effects).
	Effects []int32
	// Events are indices into Index.Events.
	Events []int32
	// Rows are indices into Index.Rows.
	Rows []int32
}

// KeyFacts is what the history says about one Idempotency-Key.
type KeyFacts struct {
	Key string
	// Oks are (op index, order id) of ok replies for the key.
	Oks []KeyReply
	// States are final-state ops whose order carries this key.
	States []KeyReply
	// Invoke is the first start invoke sent with the key (-1: none).
	Invoke int64
}

// ResourceFacts is what the history says about one counted resource.
type ResourceFacts struct {
	Initial   map[string]int64
	InitialOp int64
	// Final by key; Keys in order of first appearance.
	Final map[string]StockFact
	Keys  []string
	Snap  *SnapFact
}

func (ix *Index) res(name string) *ResourceFacts {
	r := ix.Res[name]
	if r == nil {
		r = &ResourceFacts{InitialOp: -1, Final: map[string]StockFact{}}
		ix.Res[name] = r
	}
	return r
}

// KeyReply ties an op to the order it names.
type KeyReply struct {
	Op    int64
	Order string
}

// EffectFact is one world effect, with the fields the checkers compare.
type EffectFact struct {
	Op       int64
	Proc, F  string
	Order    string
	Status   string
	Kind     string
	ChargeID string
	Amount   int64
	Replay   bool
	// Fields holds every top-level string field, only when the spec
	// matches on fields other than status and kind.
	Fields map[string]string
}

// EventFact is one broker record as the observer read it.
type EventFact struct {
	Op    int64
	Type  string
	Order string
	models.EventRecord
	// interned ids: the order's Num (-1: none), the source and the
	// topic-partition, for cheap grouping
	ord, src, part int32
}

// RowFact is one committed outbox row.
type RowFact struct {
	Op    int64
	Order string
	models.OutboxRow
}

// SnapFact is one database's outbox snapshot.
type SnapFact struct {
	Op int64
	models.OutboxSnapshot
}

// AppliedFact is one consumer's processed-message record.
type AppliedFact struct {
	Op    int64
	Order string
	models.Applied
	ord, src, consumer int32
}

// LifeFact is one change of a component's health: Up for a healthy op
// (or an older history's nemesis restart, written once the instance was
// healthy again), down for start, exit and crash.
type LifeFact struct {
	Op, T    int64
	Instance string
	F        string
	Up       bool
}

// OffsetsFact is one consumer group's committed offsets at observation.
type OffsetsFact struct {
	Op int64
	models.ConsumerOffsets
}

// DrainFact is the drain watch of one outbox database.
type DrainFact struct {
	Op int64
	models.OutboxDrain
}

// StockFact is the final stock of one SKU.
type StockFact struct {
	Op int64
	models.StockState
}

// effectWire decodes the fields of every effect type the checkers use.
type effectWire struct {
	Status   string `json:"status"`
	Kind     string `json:"kind"`
	ChargeID string `json:"charge_id"`
	Amount   int64  `json:"amount"`
	Replay   bool   `json:"replay"`
}

// NewIndex digests h for spec in one pass. It never fails: ops it cannot
// decode are listed in Index.Bad so that checkers can say unknown.
func NewIndex(h *models.History, spec models.SagaSpec) *Index {
	ix := &Index{
		Spec:        spec,
		Orders:      make(map[string]*OrderFacts),
		Keys:        make(map[string]*KeyFacts),
		EventsByID:  make(map[string]int32),
		RowsByEvent: make(map[string]int32),
		OutboxSnaps: make(map[string]SnapFact),
		Stock:       make(map[string]StockFact),
		Bad:         make(map[string][]int64),
		KafkaOp:     -1,
		InitialOp:   -1,
		QuiesceOp:   -1,
		TargetOp:    -1,
		HealedOp:    -1,
		PlanOp:      -1,
		RunEndOp:    -1,
		Offsets:     make(map[string]OffsetsFact),
		Drains:      make(map[string]DrainFact),
		closed:      make(map[string]bool),
		names:       make(map[string]int32),
		strs:        interner{},
		lastPart:    -1,
		parts:       make(map[topicPart]int32),
		fwdEvent:    make(map[string]int),
		compEvent:   make(map[string]int),
		Res:         make(map[string]*ResourceFacts),
	}
	spec = ix.resolveDomain(h, spec)
	ix.Spec = spec
	if h == nil {
		return ix
	}
	ix.Ops = h.Ops
	ix.Truncated = h.Truncated
	// Size everything once: growing slices of facts dominated the cost.
	var nEv, nRow, nApp, nEff, nOrd int
	for k := range h.Ops {
		switch op := &h.Ops[k]; op.Type {
		case models.Event:
			nEv++
		case models.Effect:
			nEff++
		case models.State:
			switch op.F {
			case models.FOutboxRow:
				nRow++
			case models.FApplied:
				nApp++
			case models.FOrderState:
				nOrd++
			}
		}
	}
	ix.Events = make([]EventFact, 0, nEv)
	ix.EventsByID = make(map[string]int32, nEv)
	ix.Rows = make([]RowFact, 0, nRow)
	ix.RowsByEvent = make(map[string]int32, nRow)
	ix.Applied = make([]AppliedFact, 0, nApp)
	ix.Effects = make([]EffectFact, 0, nEff)
	ix.Orders = make(map[string]*OrderFacts, nOrd)
	ix.OrderIDs = make([]string, 0, nOrd)
	for i, st := range spec.Steps {
		if st.Event != "" {
			ix.fwdEvent[st.Event] = i
		}
		if st.Compensation != nil && st.Compensation.Event != "" {
			ix.compEvent[st.Compensation.Event] = i
		}
		for _, es := range []*models.EffectSpec{st.Effect, compEffect(st)} {
			if es == nil {
				continue
			}
			for k := range es.Match {
				if k != "status" && k != "kind" {
					ix.extraMatch = true
				}
			}
		}
	}
	pending := make(map[string]openInvoke) // proc -> open invoke
	chargeOrder := make(map[string]string)
	var unattributed []int32
	for k := range h.Ops {
		op := &h.Ops[k]
		switch op.Type {
		case models.Invoke, models.Ok, models.Fail, models.Info:
			switch {
			case ix.isStart(op):
				ix.client(op, pending)
			case op.Proc == models.ProcHarness:
				ix.harness(op)
			case strings.HasPrefix(op.Proc, models.ProcComponentPrefix):
				ix.lifecycle(op)
			case op.Proc == models.ProcNemesis && (op.F == "crash" || op.F == "restart"):
				ix.lifecycle(op)
			}
		case models.Effect:
			e := EffectFact{Op: op.I, Proc: op.Proc, F: op.F, Order: op.Order}
			var w effectWire
			if len(op.Value) > 0 && decodeEffect(op.Value, &w, ix.strs) != nil {
				ix.bad("effect", op.I)
				continue
			}
			e.Status, e.Kind, e.ChargeID, e.Amount, e.Replay = w.Status, w.Kind, w.ChargeID, w.Amount, w.Replay
			if ix.extraMatch {
				e.Fields = stringFields(op.Value)
			}
			if e.Order != "" && e.ChargeID != "" && op.F == models.FCharge {
				chargeOrder[e.ChargeID] = e.Order
			}
			ix.Effects = append(ix.Effects, e)
			if e.Order == "" {
				unattributed = append(unattributed, int32(len(ix.Effects)-1))
			}
		case models.Event:
			ix.rowsSince.events++
			var r models.EventRecord
			if err := decodeEvent(op.Value, &r, ix.strs, op.Order, ix.eventID); err != nil {
				ix.bad("event", op.I)
				continue
			}
			r.Payload = nil
			ord := op.Order
			if ord == "" {
				ord = r.Key
			}
			ix.Events = append(ix.Events, EventFact{Op: op.I, Type: op.F, Order: ord, EventRecord: r, ord: -1,
				src: ix.intern(r.Source), part: ix.internPart(r.Topic, r.Partition)})
			n := int32(len(ix.Events) - 1)
			if r.EventID != "" {
				ix.EventsByID[r.EventID] = n // the last copy: same partition as the first
			}
			if ord != "" {
				o := ix.order(ord)
				o.Events = append(o.Events, n)
				ix.Events[n].ord = o.Num
			}
		case models.State:
			ix.state(op)
		}
	}
	// A refund names its charge, not always its order: attribute it.
	for _, n := range unattributed {
		e := &ix.Effects[n]
		if e.ChargeID != "" {
			e.Order = chargeOrder[e.ChargeID]
		}
		if e.Order == "" {
			ix.EffectsWithoutOrder++
		}
	}
	for n := range ix.Effects {
		e := &ix.Effects[n]
		if e.Order == "" {
			continue
		}
		o := ix.order(e.Order)
		o.Effects = append(o.Effects, int32(n))
		if e.Replay {
			continue
		}
		for i, st := range spec.Steps {
			if matches(st.Effect, e) {
				o.Fwd[i] = append(o.Fwd[i], e.Op)
			}
			if matches(compEffect(st), e) {
				o.Comp[i] = append(o.Comp[i], e.Op)
			}
		}
	}
	ix.deriveSeqs() // seq.go: only when the target's records carry none
	// Attributed refunds were appended late; keep effect lists in history order.
	if len(unattributed) > 0 {
		for _, o := range ix.Orders {
			for i := range o.Fwd {
				sortInt64(o.Fwd[i])
				sortInt64(o.Comp[i])
			}
		}
	}
	return ix
}

func sortInt64(s []int64) {
	if !sort.SliceIsSorted(s, func(a, b int) bool { return s[a] < s[b] }) {
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	}
}

func compEffect(st models.Step) *models.EffectSpec {
	if st.Compensation == nil {
		return nil
	}
	return st.Compensation.Effect
}

// matches reports whether e is an effect of the kind es names.
func matches(es *models.EffectSpec, e *EffectFact) bool {
	if es == nil || es.Proc != e.Proc || es.F != e.F {
		return false
	}
	for k, v := range es.Match {
		var got string
		switch {
		case e.Fields != nil:
			got = e.Fields[k]
		case k == "status":
			got = e.Status
		case k == "kind":
			got = e.Kind
		}
		if got != v {
			return false
		}
	}
	return true
}

func stringFields(raw json.RawMessage) map[string]string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return map[string]string{}
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (ix *Index) bad(cat string, op int64) { ix.Bad[cat] = append(ix.Bad[cat], op) }

// order returns the facts of order id, creating them on first sight.
func (ix *Index) order(id string) *OrderFacts {
	if ix.lastOrder != nil && ix.lastOrder.ID == id {
		return ix.lastOrder
	}
	o := ix.Orders[id]
	defer func() { ix.lastOrder = o }()
	if o == nil {
		n := len(ix.Spec.Steps)
		o = &OrderFacts{ID: id, Num: int32(len(ix.OrderIDs)), FinalOp: -1, InvokeOp: -1, Fwd: make([][]int64, n), Comp: make([][]int64, n)}
		ix.Orders[id] = o
		ix.OrderIDs = append(ix.OrderIDs, id)
	}
	return o
}

func (ix *Index) key(k string) *KeyFacts {
	f := ix.Keys[k]
	if f == nil {
		f = &KeyFacts{Key: k, Invoke: -1}
		ix.Keys[k] = f
		ix.KeyIDs = append(ix.KeyIDs, k)
	}
	return f
}

// openInvoke is a client's place-order awaiting its completion.
type openInvoke struct {
	op  int64
	key string
}

func (ix *Index) client(op *models.Op, pending map[string]openInvoke) {
	switch op.Type {
	case models.Invoke:
		var key string
		if decodeKey(op.Value, &key) != nil {
			ix.bad("client", op.I)
			delete(pending, op.Proc)
			return
		}
		pending[op.Proc] = openInvoke{op.I, key}
		if key != "" {
			if kf := ix.key(key); kf.Invoke < 0 {
				kf.Invoke = op.I
			}
		}
	case models.Ok:
		var r models.PlaceOrderReply
		if decodeReply(op.Value, &r) != nil {
			ix.bad("client", op.I)
			return
		}
		inv, open := pending[op.Proc]
		delete(pending, op.Proc)
		id := op.Order
		if id == "" {
			id = r.Order
		}
		key := r.Key
		if key == "" && open {
			key = inv.key
		}
		if id == "" {
			ix.bad("client", op.I) // an ok without an order id proves nothing
			return
		}
		o := ix.order(id)
		o.Acks = append(o.Acks, op.I)
		if o.InvokeOp < 0 && open {
			o.InvokeOp = inv.op
		}
		if key != "" {
			kf := ix.key(key)
			kf.Oks = append(kf.Oks, KeyReply{Op: op.I, Order: id})
		}
	default: // fail, info: settled from ground truth, never from the reply
		delete(pending, op.Proc)
	}
}

// Request decodes the place-order request behind o's first ack, or nil.
// It is decoded on demand: only a few checks need it.
func (ix *Index) Request(o *OrderFacts) *models.PlaceOrder {
	if o.InvokeOp < 0 {
		return nil
	}
	var p models.PlaceOrder
	if ix.Ops[o.InvokeOp].Decode(&p) != nil {
		return nil
	}
	return &p
}

func (ix *Index) harness(op *models.Op) {
	switch op.F {
	case models.FRunStart:
		var r models.RunInfo
		if err := op.Decode(&r); err != nil {
			ix.bad("harness:"+op.F, op.I)
			return
		}
		ix.Run = &r
	case models.FInitStock:
		var s models.InitialStock
		if err := op.Decode(&s); err != nil {
			ix.bad("harness:"+op.F, op.I)
			return
		}
		ix.Initial, ix.InitialOp = &s, op.I
		r := ix.res(models.LegacyStock)
		r.Initial, r.InitialOp = s.Stock, op.I
	case models.FResourceInit:
		var s models.ResourceInit
		if err := op.Decode(&s); err != nil || s.Resource == "" {
			ix.bad("harness:"+op.F, op.I)
			return
		}
		r := ix.res(s.Resource)
		r.Initial, r.InitialOp = s.Amounts, op.I
	case models.FInterrupted:
		ix.Interrupted = true
	case models.FRunEnd:
		ix.RunEndOp = op.I
	case models.FHealed:
		var hd models.Healed
		if err := op.Decode(&hd); err != nil {
			ix.bad("harness:"+op.F, op.I)
			return
		}
		ix.Healed, ix.HealedOp = &hd, op.I
	case models.FPhase:
		// An older history journals a failed heal as a phase op with an
		// error (a later one writes a healed op).
		if bytes.Contains(op.Value, []byte(`"error"`)) {
			var m map[string]string
			if json.Unmarshal(op.Value, &m) == nil && m["name"] == "heal" && m["error"] != "" && m["action"] == "" {
				ix.HealErr = m["error"]
			}
		}
	}
}

// lifecycle records a component op (start, healthy, exit; failpoint lines
// are not health) or an older history's nemesis crash / restart.
func (ix *Index) lifecycle(op *models.Op) {
	var up bool
	switch op.F {
	case models.FComponentHealthy, "restart":
		up = true
	case models.FComponentStart, models.FComponentExit, "crash":
	default:
		return
	}
	inst := strings.TrimPrefix(op.Proc, models.ProcComponentPrefix)
	if op.Proc == models.ProcNemesis {
		var f models.FaultRecord
		if op.Decode(&f) != nil || f.Target == "" {
			ix.bad("component", op.I)
			return
		}
		inst = f.Target
	}
	ix.Life = append(ix.Life, LifeFact{Op: op.I, T: op.T, Instance: inst, F: op.F, Up: up})
}

func (ix *Index) state(op *models.Op) {
	fail := func() { ix.bad("state:"+op.F, op.I) }
	switch op.F { // rows recorded, decodable or not, for the snapshot counts
	case models.FOrderState:
		ix.rowsSince.orders++
	case models.FStockState:
		ix.rowsSince.stock++
	case models.FResourceState:
		ix.rowsSince.resource++
	case models.FOutboxRow:
		ix.rowsSince.outbox++
	case models.FApplied:
		ix.rowsSince.applied++
	}
	switch op.F {
	case models.FOrderState:
		var s models.OrderState
		if op.Order == "" || decodeOrderState(op.Value, &s) != nil {
			fail()
			return
		}
		ix.OrderStates++
		o := ix.order(op.Order)
		o.Final, o.FinalOp = &s, op.I
		if s.IdempotencyKey != "" {
			kf := ix.key(s.IdempotencyKey)
			kf.States = append(kf.States, KeyReply{Op: op.I, Order: op.Order})
		}
	case models.FStockState:
		var s models.StockState
		if op.Decode(&s) != nil || s.SKU == "" {
			fail()
			return
		}
		if _, seen := ix.Stock[s.SKU]; !seen {
			ix.StockSKUs = append(ix.StockSKUs, s.SKU)
		}
		ix.Stock[s.SKU] = StockFact{Op: op.I, StockState: s}
		ix.res(models.LegacyStock).put(s.SKU, StockFact{Op: op.I, StockState: s})
	case models.FResourceState:
		var s models.ResourceState
		if op.Decode(&s) != nil || s.Resource == "" || s.Key == "" {
			fail()
			return
		}
		ix.res(s.Resource).put(s.Key, StockFact{Op: op.I, StockState: models.StockState{SKU: s.Key, Available: s.Available, Reserved: s.Reserved}})
	case models.FResourceSnapshot:
		var sn models.Snapshot
		if op.Decode(&sn) != nil {
			fail()
			return
		}
		ix.res(sn.DB).Snap = &SnapFact{Op: op.I, OutboxSnapshot: models.OutboxSnapshot(sn)}
		ix.close(models.SnapResourcePfx+sn.DB, op, sn.Rows, &ix.rowsSince.resource)
	case models.FOutboxRow:
		var r models.OutboxRow
		if decodeRow(op.Value, &r, ix.strs) != nil {
			fail()
			return
		}
		ix.Rows = append(ix.Rows, RowFact{Op: op.I, Order: op.Order, OutboxRow: r})
		n := int32(len(ix.Rows) - 1)
		if r.EventID != "" {
			ix.RowsByEvent[r.EventID] = n
		}
		if op.Order != "" {
			o := ix.order(op.Order)
			o.Rows = append(o.Rows, n)
		}
	case models.FOutboxSnapshot:
		var s models.OutboxSnapshot
		if op.Decode(&s) != nil {
			fail()
			return
		}
		ix.OutboxSnaps[s.DB] = SnapFact{Op: op.I, OutboxSnapshot: s}
		ix.close(models.SnapOutboxPfx+s.DB, op, s.Rows, &ix.rowsSince.outbox)
	case models.FApplied:
		var a models.Applied
		if decodeApplied(op.Value, &a, ix.strs, ix.eventID) != nil {
			fail()
			return
		}
		af := AppliedFact{Op: op.I, Order: op.Order, Applied: a, ord: -1, src: ix.intern(a.Source), consumer: ix.intern(a.Consumer)}
		if op.Order != "" {
			af.ord = ix.order(op.Order).Num
		}
		ix.Applied = append(ix.Applied, af)
	case models.FKafkaSnapshot:
		var s models.KafkaSnapshot
		if op.Decode(&s) != nil {
			fail()
			return
		}
		ix.KafkaSnap, ix.KafkaOp = &s, op.I
		ix.close(models.SnapKafka, op, s.Records, &ix.rowsSince.events)
	case models.FOrdersSnapshot, models.FStockSnapshot, models.FAppliedSnapshot:
		var sn models.Snapshot
		if op.Decode(&sn) != nil {
			fail()
			return
		}
		f := &SnapFact{Op: op.I, OutboxSnapshot: models.OutboxSnapshot(sn)}
		switch op.F {
		case models.FOrdersSnapshot:
			ix.OrdersSnap = f
			ix.close(models.SnapOrders, op, sn.Rows, &ix.rowsSince.orders)
		case models.FStockSnapshot:
			ix.StockSnap = f
			ix.res(models.LegacyStock).Snap = f
			ix.close(models.SnapStock, op, sn.Rows, &ix.rowsSince.stock)
		default:
			ix.AppliedSnaps = append(ix.AppliedSnaps, *f)
			ix.close(models.SnapApplied+sn.DB, op, sn.Rows, &ix.rowsSince.applied)
		}
	case models.FObservePlan:
		var p models.ObservePlan
		if op.Decode(&p) != nil {
			fail()
			return
		}
		ix.Plan, ix.PlanOp = &p, op.I
	case models.FOutboxDrain:
		var d models.OutboxDrain
		if op.Decode(&d) != nil {
			fail()
			return
		}
		ix.Drains[d.DB] = DrainFact{Op: op.I, OutboxDrain: d}
		ix.closed[models.SnapDrainPfx+d.DB] = true
	case models.FConsumerOffsets:
		var c models.ConsumerOffsets
		if op.Decode(&c) != nil {
			fail()
			return
		}
		ix.Offsets[c.Group] = OffsetsFact{Op: op.I, ConsumerOffsets: c}
		ix.closed[models.SnapOffsetPfx+c.Group] = true
	case models.FQuiesce:
		var q models.Quiesce
		if op.Decode(&q) != nil {
			fail()
			return
		}
		ix.Quiesce, ix.QuiesceOp = &q, op.I
	}
}

// close notes the closing op of snapshot name and checks its row count
// against the rows recorded since the previous closing op of its kind (the
// observer writes each snapshot's rows, then its closing op).
func (ix *Index) close(name string, op *models.Op, rows int, since *int) {
	ix.closed[name] = true
	if rows != *since {
		ix.miscount = append(ix.miscount, fmt.Sprintf("%s (op #%d) closes %d rows but %d were recorded", op.F, op.I, rows, *since))
	}
	*since = 0
}

// badIn returns a description of undecodable ops in the given categories
// (a category ending in ":" matches every category with that prefix).
func (ix *Index) badIn(cats ...string) string {
	var parts []string
	for _, c := range cats {
		for k, ops := range ix.Bad {
			if k == c || (strings.HasSuffix(c, ":") && strings.HasPrefix(k, c)) {
				parts = append(parts, fmt.Sprintf("%d undecodable %s ops (first #%d)", len(ops), k, ops[0]))
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func first(s []int64) int64 {
	if len(s) == 0 {
		return -1
	}
	return s[0]
}

// topicPart names one partition of one topic.
type topicPart struct {
	Topic     string
	Partition int32
}

// intern maps a short name (source, consumer) to a small id.
func (ix *Index) intern(name string) int32 {
	// few distinct names: a scan beats hashing
	for i, n := range ix.nameList {
		if n == name {
			return int32(i)
		}
	}
	id, ok := ix.names[name]
	if !ok {
		id = int32(len(ix.names))
		ix.names[name] = id
		if len(ix.nameList) < 16 && int(id) == len(ix.nameList) {
			ix.nameList = append(ix.nameList, name)
		}
	}
	return id
}

func (ix *Index) internPart(topic string, p int32) int32 {
	if ix.lastPart >= 0 {
		if lp := ix.PartNames[ix.lastPart]; lp.Partition == p && lp.Topic == topic {
			return ix.lastPart
		}
	}
	id := ix.internPartSlow(topic, p)
	ix.lastPart = id
	return id
}

func (ix *Index) internPartSlow(topic string, p int32) int32 {
	k := topicPart{topic, p}
	id, ok := ix.parts[k]
	if !ok {
		id = int32(len(ix.PartNames))
		ix.parts[k] = id
		ix.PartNames = append(ix.PartNames, k)
	}
	return id
}

// OrdersComplete reports whether the observer listed every order the
// target knows (a complete orders-snapshot), so that an order's absence
// from the final states is evidence.
func (ix *Index) OrdersComplete() bool { return ix.OrdersSnap != nil && ix.OrdersSnap.Complete }

// quiesceEvidence returns the quiesce op when its Pending list can be
// believed (it exists and the target's API answered).
func (ix *Index) quiesceEvidence() *models.Quiesce {
	if ix.Quiesce == nil || ix.Quiesce.Error != "" {
		return nil
	}
	return ix.Quiesce
}

// SourceDB returns the database whose outbox a source publishes from:
// learnt from the source's records that match an outbox row, else the
// database named like the source. ok is false when unknown or ambiguous.
func (ix *Index) SourceDB(source string) (db string, ok bool) {
	ix.srcDBOnce.Do(func() {
		ix.srcDB = map[string]string{}
		for n := range ix.Events {
			e := &ix.Events[n]
			row, ok := ix.RowsByEvent[e.EventID]
			if e.EventID == "" || !ok {
				continue
			}
			db := ix.Rows[row].DB
			if cur, ok := ix.srcDB[e.Source]; !ok {
				ix.srcDB[e.Source] = db
			} else if cur != db {
				ix.srcDB[e.Source] = "" // ambiguous
			}
		}
	})
	db, ok = ix.srcDB[source]
	if !ok {
		if _, have := ix.OutboxSnaps[source]; have {
			return source, true
		}
		return "", false
	}
	return db, db != ""
}

// RowInLog reports whether row n's event_id is in the Kafka log (computed
// once, for every checker that asks).
func (ix *Index) RowInLog(n int) bool {
	ix.inLogOnce.Do(func() {
		ix.rowInLog = make([]bool, len(ix.Rows))
		for i := range ix.Rows {
			if id := ix.Rows[i].EventID; id != "" {
				_, ix.rowInLog[i] = ix.EventsByID[id]
			}
		}
	})
	return ix.rowInLog[n]
}

// eventID decodes an event_id, sharing the string of an outbox row or an
// event already decoded with the same id (the observer writes rows before
// the log, and applied records after it): one allocation per id, not three.
func (ix *Index) eventID(v []byte, dst *string) bool {
	if body, ok := plain(v); ok {
		if n, ok := ix.RowsByEvent[string(body)]; ok {
			*dst = ix.Rows[n].EventID
			return true
		}
	}
	return jstr(v, dst)
}
