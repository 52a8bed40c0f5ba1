package cdcrelay

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// outboxTable is the relation whose inserts the relay publishes (the
// publication names only it; the check is a guard, not a filter).
const outboxTable = "outbox"

// row is one decoded outbox insert.
type row struct {
	id                 int64
	eventID, agg       string
	seq                int64
	typ, topic, source string
	payload            []byte
}

// txn is one committed transaction: its outbox rows in insert order and
// the end of its commit record, the position a relay confirms once every
// row is acknowledged.
type txn struct {
	end  pglogrepl.LSN
	rows []row
}

// decoder turns pgoutput (protocol 1) messages into committed
// transactions. pgoutput sends only committed transactions, each as BEGIN,
// its changes, COMMIT, in commit order: the slot's order is the commit
// order, which for one aggregate is its seq order (package outbox).
type decoder struct {
	relations map[uint32]*pglogrepl.RelationMessage
	open      *txn
}

func newDecoder() *decoder { return &decoder{relations: map[uint32]*pglogrepl.RelationMessage{}} }

// feed decodes one message; it returns the transaction a COMMIT closed.
func (d *decoder) feed(data []byte) (*txn, error) {
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("decode pgoutput: %w", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		d.relations[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		d.open = &txn{}
	case *pglogrepl.InsertMessage:
		if d.open == nil {
			return nil, fmt.Errorf("decode pgoutput: insert outside a transaction")
		}
		rel := d.relations[m.RelationID]
		if rel == nil {
			return nil, fmt.Errorf("decode pgoutput: insert into unknown relation %d", m.RelationID)
		}
		if rel.RelationName != outboxTable {
			return nil, nil
		}
		r, err := decodeRow(rel, m.Tuple)
		if err != nil {
			return nil, err
		}
		d.open.rows = append(d.open.rows, r)
	case *pglogrepl.CommitMessage:
		if d.open == nil {
			return nil, fmt.Errorf("decode pgoutput: commit outside a transaction")
		}
		t := d.open
		d.open = nil
		t.end = m.TransactionEndLSN
		return t, nil
	}
	return nil, nil
}

// inTxn reports whether a transaction is open (BEGIN seen, COMMIT not yet).
func (d *decoder) inTxn() bool { return d.open != nil }

// decodeRow reads the outbox columns of one insert by name (text format).
func decodeRow(rel *pglogrepl.RelationMessage, t *pglogrepl.TupleData) (row, error) {
	var r row
	if t == nil || len(t.Columns) != len(rel.Columns) {
		return r, fmt.Errorf("decode outbox insert: tuple does not match relation %s", rel.RelationName)
	}
	for i, c := range rel.Columns {
		col := t.Columns[i]
		if col.DataType != pglogrepl.TupleDataTypeText {
			continue // NULL (published_at) or an unchanged TOAST value
		}
		v := col.Data
		var err error
		switch c.Name {
		case "id":
			r.id, err = col.Int64()
		case "event_id":
			r.eventID = string(v)
		case "aggregate_id":
			r.agg = string(v)
		case "seq":
			r.seq, err = col.Int64()
		case "type":
			r.typ = string(v)
		case "topic":
			r.topic = string(v)
		case "source":
			r.source = string(v)
		case "payload":
			r.payload = append([]byte(nil), v...)
		}
		if err != nil {
			return r, fmt.Errorf("decode outbox insert: column %s: %w", c.Name, err)
		}
	}
	if r.eventID == "" || r.agg == "" || r.topic == "" {
		return r, fmt.Errorf("decode outbox insert: event_id, aggregate_id or topic missing")
	}
	return r, nil
}
