package env

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServerDatabase is the name database db has on the server (prefixed per
// run on an external server): what pg_replication_slots.database says of a
// slot in it.
func (e *Env) ServerDatabase(db string) string { return e.actualDB(db) }

// dropSlots drops the replication slots of database db (a run's CDC relays
// leave theirs behind; DROP DATABASE refuses a database that has one),
// ending any walsender that still holds one first.
func dropSlots(ctx context.Context, conn *pgx.Conn, db string) error {
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, db); err != nil {
		return fmt.Errorf("end the walsenders of %s: %w", db, err)
	}
	var last error
	for i := 0; i < 50; i++ {
		_, last = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db)
		var left int
		if last == nil {
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db).Scan(&left); err != nil {
				return err
			}
			if left == 0 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("drop the replication slots of %s: %v", db, last)
}

// A Refusal is the server refusing the target something for want of a
// setting, as the server logged it: a target that needs wal_level=logical
// and does not say so in its manifest fails this way (its relay's slot is
// never created), and a run that went on would end with every saga stuck
// instead of saying why.
type Refusal struct {
	// Name is the setting ("wal_level"), Setting what the target needs of
	// it ("wal_level=logical", "max_replication_slots (more)"), Line the
	// first log line that said so and Count how many lines did.
	Name    string
	Setting string
	Line    string
	Count   int
}

// refusalPatterns map a server error to the setting it wants.
var refusalPatterns = []struct{ substr, name, setting string }{
	{"logical decoding requires wal_level >= logical", "wal_level", "wal_level=logical"},
	{"replication slots can only be used if max_replication_slots > 0", "max_replication_slots", "max_replication_slots (more than 0)"},
	{"all replication slots are in use", "max_replication_slots", "max_replication_slots (more)"},
	{"number of requested standby connections exceeds max_wal_senders", "max_wal_senders", "max_wal_senders (more)"},
	{"prepared transactions are disabled", "max_prepared_transactions", "max_prepared_transactions (more than 0)"},
}

// Refusals reads the server log (the embedded cluster's; nil for servers
// the harness does not own) for errors that name a setting the target
// needed and did not get.
func (e *Env) Refusals() []Refusal {
	p, ok := e.pg.(*localPG)
	if !ok || p.logPath == "" {
		return nil
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	return parseRefusals(string(b))
}

func parseRefusals(log string) []Refusal {
	var out []Refusal
	idx := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "ERROR:") && !strings.Contains(line, "FATAL:") {
			continue
		}
		for _, p := range refusalPatterns {
			if !strings.Contains(line, p.substr) {
				continue
			}
			if i, ok := idx[p.setting]; ok {
				out[i].Count++
				continue
			}
			idx[p.setting] = len(out)
			out = append(out, Refusal{Name: p.name, Setting: p.setting, Line: strings.TrimSpace(line), Count: 1})
		}
	}
	return out
}
