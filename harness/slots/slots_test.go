package slots

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/targets"
)

// A declared slot, held by a replication connection named after an
// instance, reads back with its holder, positions and lag; a sampler
// records it into the history until stopped.
func TestWatchReadsHolderAndLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := env.Up(ctx, env.Config{Dir: t.TempDir(), Databases: []string{"orders", "inventory"},
		PostgresSettings: map[string]string{"wal_level": "logical", "max_replication_slots": "8", "max_wal_senders": "8"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := &targets.Manifest{Processes: []targets.Process{{Name: "relay", Replicas: 2, Slots: []targets.Slot{{DB: "orders"}, {DB: "inventory"}}}}}
	decls := Decls(m, map[string]int{"relay": 2}, e.ServerDatabase)
	if len(decls) != 2 || decls[0].Instances[1] != "relay-2" {
		t.Fatalf("decls %+v", decls)
	}
	w := New(decls, e.DirectDSN("orders"), nil)

	conn, err := pgx.Connect(ctx, e.DirectDSN("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot('outbox_orders', 'pgoutput')`); err != nil {
		t.Fatal(err)
	}
	// inventory has no slot yet
	s := w.Read(ctx, models.SlotsDuringRun)
	if s.Error != "" || len(s.Slots) != 2 || !s.Slots[0].Exists || s.Slots[0].Active || s.Slots[1].Exists {
		t.Fatalf("before anyone holds it: %+v", s)
	}
	// relay-2 streams the orders slot
	rc, err := pgconn.Connect(ctx, e.DirectDSN("orders")+"&replication=database&application_name=relay-2")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE PUBLICATION p FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, rc, "outbox_orders", 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'p'"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (x int); INSERT INTO t SELECT generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	var st models.SlotState
	for i := 0; i < 100; i++ {
		s = w.Read(ctx, models.SlotsDuringRun)
		st = s.Slots[0]
		if st.Active && st.LagBytes > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Holder != "relay-2" || st.HolderPID == 0 || st.Slot != "outbox_orders" || st.ConfirmedLSN == "" || st.RestartLSN == "" || st.LagBytes <= 0 || st.RetainedBytes < st.LagBytes {
		t.Fatalf("held: %+v (current %s)", st, s.CurrentLSN)
	}
	v, err := w.Slot(ctx, "orders")
	if err != nil || v.Holder != "relay-2" || !v.Active || v.LagBytes <= 0 {
		t.Fatalf("fault view %+v, %v", v, err)
	}
	if got := w.Instances("orders"); len(got) != 2 || got[0] != "relay-1" {
		t.Fatalf("instances %v", got)
	}

	rec, _ := models.NewRecorder(nil, models.Header{})
	stop := w.Start(rec, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	stop()
	n := len(rec.Ops())
	for _, op := range rec.Ops() {
		var s models.SlotSample
		if op.F != models.FSlots || op.Type != models.Info || op.Decode(&s) != nil || s.Error != "" || s.Slots[0].Holder != "relay-2" {
			t.Fatalf("sample op %+v", op)
		}
	}
	if n < 3 {
		t.Fatalf("%d samples in 200 ms at 20 ms", n)
	}
	w.Sample(ctx, rec, models.SlotsAtObserve)
	if last := rec.Ops()[len(rec.Ops())-1]; last.Type != models.State || len(rec.Ops()) != n+1 {
		t.Fatalf("observation sample %+v after %d samples", last, n)
	}
	// an application_name that is no instance names no holder
	rc.Close(ctx)
	other, err := pgconn.Connect(ctx, e.DirectDSN("orders")+"&replication=database&application_name=someone-else")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	for i := 0; i < 100; i++ {
		err = pglogrepl.StartReplication(ctx, other, "outbox_orders", 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{"proto_version '1'", "publication_names 'p'"}})
		if err == nil {
			break
		}
		other.Close(ctx)
		time.Sleep(20 * time.Millisecond)
		if other, err = pgconn.Connect(ctx, e.DirectDSN("orders")+"&replication=database&application_name=someone-else"); err != nil {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	st = w.Read(ctx, models.SlotsDuringRun).Slots[0]
	if !st.Active || st.Holder != "" || st.HolderApp != "someone-else" {
		t.Fatalf("held by a stranger: %+v", st)
	}
}
