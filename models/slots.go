package models

// This file is the vocabulary of logical replication slots: what the
// harness sees of the slots a CDC relay holds (manifest
// processes[].slots), sampled during the run and once at observation. A
// slot's confirmed position is where the relay said it had delivered
// everything before; the lag is the WAL written since, which the slot
// holds on the server until the relay confirms it.

// FSlots is one sample of every declared slot. Proc ProcObserver; Type
// Info for the samples taken while the run goes on (every few hundred
// milliseconds, from target-up until observation), Type State for the one
// taken at observation. Value: SlotSample.
const FSlots = "slots"

// Where a slot sample was taken (SlotSample.At).
const (
	SlotsDuringRun = "run"
	SlotsAtObserve = "observe"
)

// SlotSample is the value of FSlots.
type SlotSample struct {
	At string `json:"at"`
	// CurrentLSN is the server's current WAL position (pg_current_wal_lsn).
	CurrentLSN string      `json:"current_lsn,omitempty"`
	Slots      []SlotState `json:"slots,omitempty"`
	// Error: the server could not be read (it may be down); Slots is empty.
	Error string `json:"error,omitempty"`
}

// SlotState is one declared slot in a sample.
type SlotState struct {
	// DB is the manifest's database; Slot the slot's name ("" when it does
	// not exist yet).
	DB   string `json:"db"`
	Slot string `json:"slot,omitempty"`
	// Exists is false when the database has no such slot (yet).
	Exists bool `json:"exists"`
	// Active: a walsender holds the slot; HolderPID is its pid, Holder the
	// instance it belongs to (its application_name, when that names one of
	// the instances of the process that declares the slot) and HolderApp
	// the application_name as reported.
	Active    bool   `json:"active,omitempty"`
	HolderPID int    `json:"holder_pid,omitempty"`
	Holder    string `json:"holder,omitempty"`
	HolderApp string `json:"holder_app,omitempty"`
	// ConfirmedLSN (confirmed_flush_lsn) and RestartLSN (restart_lsn) are
	// the slot's positions.
	ConfirmedLSN string `json:"confirmed_lsn,omitempty"`
	RestartLSN   string `json:"restart_lsn,omitempty"`
	// LagBytes is current − confirmed: WAL the relay has not confirmed.
	// RetainedBytes is current − restart: WAL the slot keeps on disk.
	LagBytes      int64 `json:"lag_bytes"`
	RetainedBytes int64 `json:"retained_bytes"`
	// WALStatus is pg_replication_slots.wal_status (reserved, extended,
	// unreserved, lost).
	WALStatus string `json:"wal_status,omitempty"`
}
