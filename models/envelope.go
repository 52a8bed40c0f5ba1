package models

import "encoding/json"

// The event envelope: every message a target publishes carries these Kafka
// record headers, and its key is the aggregate (order) id. The observer
// copies them into EventRecord.
const (
	HeaderEventID     = "event_id"
	HeaderAggregateID = "aggregate_id"
	HeaderSeq         = "seq"    // decimal, per aggregate and source, assigned in the outbox transaction
	HeaderType        = "type"   // event or command type, e.g. "StockReserved"
	HeaderSource      = "source" // the service whose outbox the message left
)

// EventRecord is the value of an Event op (Proc ProcObserver, F the event
// type, Order the aggregate id): one record as found in the broker log.
type EventRecord struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	EventID   string `json:"event_id"`
	Seq       int64  `json:"seq"`
	Source    string `json:"source,omitempty"`
	// Timestamp is the record's broker timestamp (Unix nanoseconds, the
	// producer's clock): when the record entered the log, as opposed to
	// when the observer read it.
	Timestamp int64 `json:"timestamp_ns,omitempty"`
	// Payload is the record value, kept only when it is small JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Malformed says what envelope header was missing or unreadable.
	Malformed string `json:"malformed,omitempty"`
}
