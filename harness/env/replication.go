package env

import (
	"context"
	"fmt"
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
