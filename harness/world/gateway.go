package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// Card token prefixes that decide a charge's fate.
const (
	CardDeclinePrefix      = "tok_decline"
	CardAmbiguous500Prefix = "tok_ambiguous_500"
	CardAmbiguousHangPfx   = "tok_ambiguous_hang"
)

// Charge is one charge the gateway made (a snapshot).
type Charge struct {
	ID       string
	OrderID  string
	Amount   int64
	Card     string
	Status   string // models.ChargeSucceeded or models.ChargeDeclined
	Refunded int64  // sum of succeeded refunds
}

// Refund is one refund request the gateway acted on (a snapshot).
type Refund struct {
	ID       string // empty when rejected
	ChargeID string
	OrderID  string
	Amount   int64
	Status   string // "succeeded" or "rejected"
}

// Refund statuses.
const (
	RefundSucceeded = "succeeded"
	RefundRejected  = "rejected"
)

// Gateway is the fake payment gateway: POST /charges, POST /refunds.
type Gateway struct {
	svc     *service
	charges []*Charge
	byID    map[string]*Charge
	refunds []Refund
	nRefund int
}

func newGateway(rec *models.Recorder, o *options) *Gateway {
	g := &Gateway{svc: newService("gateway", models.ProcGateway, rec, o), byID: map[string]*Charge{}}
	g.svc.handle("POST /charges", models.FCharge, g.parseCharge)
	g.svc.handle("POST /refunds", models.FRefund, g.parseRefund)
	return g
}

// Addr is the gateway's host:port (put a toxiproxy link in front of it).
func (g *Gateway) Addr() string { return g.svc.addr() }

// InjectAmbiguous makes the next n new charges ambiguous whatever the
// card: mode AmbiguousError (applied, answered 500) or AmbiguousHang
// (applied, never answered). It replaces any earlier charge injection; n = 0
// clears it. Replays are never ambiguous.
func (g *Gateway) InjectAmbiguous(mode string, n int) error {
	return g.svc.inject(models.FCharge, mode, n)
}

// InjectAmbiguousRefunds does the same for the next n new refunds (the
// refund is applied, the caller does not learn it).
func (g *Gateway) InjectAmbiguousRefunds(mode string, n int) error {
	return g.svc.inject(models.FRefund, mode, n)
}

// Charges returns a snapshot of every charge, in the order they were made.
func (g *Gateway) Charges() []Charge {
	g.svc.mu.Lock()
	defer g.svc.mu.Unlock()
	out := make([]Charge, len(g.charges))
	for i, c := range g.charges {
		out[i] = *c
	}
	return out
}

// Refunds returns a snapshot of every refund request acted on, in order.
func (g *Gateway) Refunds() []Refund {
	g.svc.mu.Lock()
	defer g.svc.mu.Unlock()
	return append([]Refund(nil), g.refunds...)
}

type chargeReq struct {
	g       *Gateway
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
	Card    string `json:"card"`
}

type chargeReply struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
}

func (g *Gateway) parseCharge(body []byte) (request, error) {
	r := &chargeReq{g: g}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("charge body: %w", err)
	}
	if r.OrderID == "" {
		return nil, errors.New("charge: order_id is required")
	}
	if r.Amount <= 0 {
		return nil, fmt.Errorf("charge: amount %d must be positive (minor units)", r.Amount)
	}
	return r, nil
}

func (r *chargeReq) orderID() string { return r.OrderID }

func (r *chargeReq) ambiguity() string {
	switch {
	case strings.HasPrefix(r.Card, CardAmbiguous500Prefix):
		return AmbiguousError
	case strings.HasPrefix(r.Card, CardAmbiguousHangPfx):
		return AmbiguousHang
	}
	return ""
}

func (r *chargeReq) apply(amb, key string) outcome {
	g := r.g
	c := &Charge{ID: fmt.Sprintf("ch_%06d", len(g.charges)+1), OrderID: r.OrderID, Amount: r.Amount, Card: r.Card, Status: models.ChargeSucceeded}
	ans := answer{status: http.StatusOK}
	reply := chargeReply{ID: c.ID, Status: c.Status}
	if strings.HasPrefix(r.Card, CardDeclinePrefix) {
		c.Status = models.ChargeDeclined
		reply = chargeReply{ID: c.ID, Status: c.Status, Code: "card_declined"}
		ans.status = http.StatusPaymentRequired
	}
	ans.body = mustJSON(reply)
	g.charges = append(g.charges, c)
	g.byID[c.ID] = c
	return outcome{order: r.OrderID, answer: ans, effect: chargeEffect{models.ChargeEffect{
		ChargeID: c.ID, Amount: c.Amount, Card: c.Card, Status: c.Status, Ambiguous: amb, IdempotencyKey: key,
	}}}
}

// chargeEffect adds replay() to models.ChargeEffect; it marshals as the
// embedded struct.
type chargeEffect struct{ models.ChargeEffect }

func (e chargeEffect) replay() replayable {
	e.Replay, e.Ambiguous = true, ""
	return e
}

type refundReq struct {
	g        *Gateway
	ChargeID string `json:"charge_id"`
	Amount   int64  `json:"amount"`
	OrderID  string `json:"order_id"`
}

type refundReply struct {
	ID     string `json:"id,omitempty"`
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (g *Gateway) parseRefund(body []byte) (request, error) {
	r := &refundReq{g: g}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("refund body: %w", err)
	}
	if r.ChargeID == "" {
		return nil, errors.New("refund: charge_id is required")
	}
	if r.Amount < 0 {
		return nil, fmt.Errorf("refund: amount %d is negative", r.Amount)
	}
	return r, nil
}

func (r *refundReq) orderID() string   { return r.OrderID }
func (r *refundReq) ambiguity() string { return "" }

// apply refunds amount (0: whatever is left of the charge, like Stripe).
func (r *refundReq) apply(amb, key string) outcome {
	g := r.g
	order := r.OrderID
	eff := models.RefundEffect{ChargeID: r.ChargeID, Amount: r.Amount, Status: RefundRejected, Ambiguous: amb, IdempotencyKey: key}
	rf := Refund{ChargeID: r.ChargeID, OrderID: order, Amount: r.Amount, Status: RefundRejected}
	var ans answer
	c, ok := g.byID[r.ChargeID]
	switch {
	case !ok:
		ans = answer{http.StatusNotFound, mustJSON(refundReply{Status: RefundRejected, Code: "charge_not_found", Error: "no charge " + r.ChargeID})}
	default:
		if order == "" {
			order = c.OrderID
			rf.OrderID = order
		}
		left := int64(0)
		if c.Status == models.ChargeSucceeded {
			left = c.Amount - c.Refunded
		}
		amount := r.Amount
		if amount == 0 {
			amount = left
		}
		eff.Amount, rf.Amount = amount, amount
		if amount <= 0 || amount > left {
			ans = answer{http.StatusBadRequest, mustJSON(refundReply{Status: RefundRejected, Code: "refund_exceeds_charge",
				Error: fmt.Sprintf("refund of %d exceeds the %d left on %s (status %s)", amount, left, c.ID, c.Status)})}
			break
		}
		g.nRefund++
		rf.ID = fmt.Sprintf("re_%06d", g.nRefund)
		rf.Status = RefundSucceeded
		c.Refunded += amount
		eff.RefundID, eff.Status = rf.ID, RefundSucceeded
		ans = answer{http.StatusOK, mustJSON(refundReply{ID: rf.ID, Status: RefundSucceeded})}
	}
	g.refunds = append(g.refunds, rf)
	return outcome{order: order, answer: ans, effect: refundEffect{eff}}
}

type refundEffect struct{ models.RefundEffect }

func (e refundEffect) replay() replayable {
	e.Replay, e.Ambiguous = true, ""
	return e
}
