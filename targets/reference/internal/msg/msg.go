// Package msg defines the messages the reference services exchange: topic
// names, message types and the one JSON payload they all carry. Every
// message's Kafka key is the order id; the envelope headers are those of
// models (event_id, aggregate_id, seq, type, source).
package msg

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/sagachaos/sagachaos/models"
)

// Topics: each service publishes to the topic named after it, so the
// source of a record is also its topic.
const (
	TopicOrders    = "orders"
	TopicInventory = "inventory"
	TopicPayment   = "payment"
	TopicDelivery  = "delivery"
)

// Message types. Commands go from the orchestrator (orders) to a
// participant; replies and events come back.
const (
	OrderCreated   = "OrderCreated"
	OrderApproved  = "OrderApproved"
	OrderCancelled = "OrderCancelled"

	ReserveStock       = "ReserveStock"
	ReleaseStock       = "ReleaseStock"
	StockReserved      = "StockReserved"
	StockReserveFailed = "StockReserveFailed"
	StockReleased      = "StockReleased"

	ChargePayment    = "ChargePayment"
	CancelCharge     = "CancelCharge"
	PaymentCharged   = "PaymentCharged"
	PaymentDeclined  = "PaymentDeclined"
	PaymentCancelled = "PaymentCancelled"
	// RefundPayment gives a settled charge back (a customer return, an
	// operator's decision). The order saga never sends it: the charge is
	// its pivot, and after the pivot the saga only goes forward.
	RefundPayment   = "RefundPayment"
	PaymentRefunded = "PaymentRefunded"

	ScheduleDelivery  = "ScheduleDelivery"
	DeliveryScheduled = "DeliveryScheduled"
)

// Payload is the JSON value of every message: the order as the saga knows
// it, plus what the step produced. Carrying the whole order keeps the
// participants free of lookups in other services' databases.
type Payload struct {
	OrderID  string        `json:"order_id"`
	Customer string        `json:"customer,omitempty"`
	Items    []models.Item `json:"items,omitempty"`
	Card     string        `json:"card,omitempty"`
	Total    int64         `json:"total,omitempty"`
	// Reason explains a failure reply (out_of_stock, card_declined, …).
	Reason     string `json:"reason,omitempty"`
	ChargeID   string `json:"charge_id,omitempty"`
	ShipmentID string `json:"shipment_id,omitempty"`
}

// NewID returns a random identifier with a prefix ("o-", "ev-").
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
