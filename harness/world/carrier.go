package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sagachaos/sagachaos/models"
)

// Shipment is one shipment the carrier booked (a snapshot).
type Shipment struct {
	ID      string
	OrderID string
	Items   []models.Item
}

// Carrier is the fake carrier: POST /shipments.
type Carrier struct {
	svc       *service
	shipments []Shipment
}

func newCarrier(rec *models.Recorder, o *options) *Carrier {
	c := &Carrier{svc: newService("carrier", models.ProcCarrier, rec, o)}
	c.svc.handle("POST /shipments", models.FShipment, c.parse)
	return c
}

// Addr is the carrier's host:port.
func (c *Carrier) Addr() string { return c.svc.addr() }

// InjectAmbiguous makes the next n new shipment requests ambiguous (see
// Gateway.InjectAmbiguous).
func (c *Carrier) InjectAmbiguous(mode string, n int) error {
	return c.svc.inject(models.FShipment, mode, n)
}

// Shipments returns a snapshot of every shipment, in booking order.
func (c *Carrier) Shipments() []Shipment {
	c.svc.mu.Lock()
	defer c.svc.mu.Unlock()
	return append([]Shipment(nil), c.shipments...)
}

type shipmentReq struct {
	c       *Carrier
	OrderID string        `json:"order_id"`
	Items   []models.Item `json:"items"`
}

func (c *Carrier) parse(body []byte) (request, error) {
	r := &shipmentReq{c: c}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("shipment body: %w", err)
	}
	if r.OrderID == "" {
		return nil, errors.New("shipment: order_id is required")
	}
	return r, nil
}

func (r *shipmentReq) orderID() string   { return r.OrderID }
func (r *shipmentReq) ambiguity() string { return "" }

func (r *shipmentReq) apply(amb, key string) outcome {
	c := r.c
	s := Shipment{ID: fmt.Sprintf("sh_%06d", len(c.shipments)+1), OrderID: r.OrderID, Items: r.Items}
	c.shipments = append(c.shipments, s)
	return outcome{
		order:  r.OrderID,
		answer: answer{http.StatusCreated, mustJSON(map[string]string{"id": s.ID})},
		effect: shipmentEffect{models.ShipmentEffect{ShipmentID: s.ID, IdempotencyKey: key, Ambiguous: amb}},
	}
}

type shipmentEffect struct{ models.ShipmentEffect }

func (e shipmentEffect) replay() replayable {
	e.Replay, e.Ambiguous = true, ""
	return e
}
