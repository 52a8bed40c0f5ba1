package mutant

// Planted bugs of the CDC relay (package cdcrelay; the reference-cdc
// target's manifest lists them with the checkers that must catch them).
// They live in their own file so that the polling flavour's list above
// stays as it is.
const (
	// CDCConfirmBeforeAck: the slot's position is confirmed as soon as a
	// transaction is decoded, before the broker acknowledged its rows; a
	// crash or a failed produce in between loses them (the slot never
	// sends them again).
	CDCConfirmBeforeAck = "cdc-confirm-before-ack"
	// CDCHealthyBeforeSlot: the relay reports healthy at once and creates
	// its publication and slot on its first slot check, a second later;
	// every row committed before the slot existed is never decoded.
	CDCHealthyBeforeSlot = "cdc-healthy-before-slot"
	// CDCNoSlotReconnect: a relay waiting for its slot checks it over one
	// connection in a loop and never reconnects it after the server
	// restarts: it stays alive and healthy and relays nothing.
	CDCNoSlotReconnect = "cdc-no-slot-reconnect"
)

func init() {
	Implemented[CDCConfirmBeforeAck] = "the CDC relay confirms the slot position before the broker acknowledged the rows"
	Implemented[CDCHealthyBeforeSlot] = "the CDC relay reports healthy before its publication and replication slot exist"
	Implemented[CDCNoSlotReconnect] = "the CDC relay waits for its slot over one status connection and never reconnects it after the server restarts"
}
