// Package slots watches the logical replication slots a target's CDC
// relays hold (manifest processes[].slots): it reads their state from
// pg_replication_slots (who holds each, the confirmed and restart
// positions, the lag in bytes), samples it into the history while the run
// goes on and once at observation (models.FSlots), and answers the CDC
// fault kinds' questions (which instance holds the slot of a database).
//
// A slot's holder is the walsender whose application_name is one of the
// instances of the process that declares the slot: a relay names its
// replication connections after its instance (SAGACHAOS_INSTANCE).
package slots

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios/faults"
	"github.com/sagachaos/sagachaos/targets"
)

// Decl is one declared slot of a run.
type Decl struct {
	// DB is the manifest's database, Server its name on the server.
	DB, Server string
	// Name is the declared slot name; "": the database's logical slot.
	Name string
	// Process declares the slot; Instances are its running instances.
	Process   string
	Instances []string
}

// Decls lists the slots m's processes declare, with the instances a run
// with these replica counts has.
func Decls(m *targets.Manifest, replicas map[string]int, server func(db string) string) []Decl {
	var out []Decl
	for _, p := range m.Processes {
		n := p.Replicas
		if r, ok := replicas[p.Name]; ok {
			n = r
		}
		q := p
		q.Replicas = n
		for _, s := range p.Slots {
			d := Decl{DB: s.DB, Server: s.DB, Name: s.Name, Process: p.Name, Instances: q.Instances()}
			if server != nil {
				d.Server = server(s.DB)
			}
			out = append(out, d)
		}
	}
	return out
}

// Watch reads the declared slots of one run.
type Watch struct {
	decls []Decl
	// dsn is a direct URL of any database of the server: the slot views
	// are cluster-wide.
	dsn string
	log *slog.Logger
}

// New returns a watch of decls through dsn; nil when there is nothing to
// watch.
func New(decls []Decl, dsn string, log *slog.Logger) *Watch {
	if len(decls) == 0 {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &Watch{decls: decls, dsn: dsn, log: log}
}

const slotsSQL = `SELECT s.slot_name::text, s.database::text, s.active, coalesce(s.active_pid, 0),
	coalesce(a.application_name, ''),
	coalesce(s.confirmed_flush_lsn::text, ''), coalesce(s.restart_lsn::text, ''),
	pg_current_wal_lsn()::text,
	coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::bigint,
	coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::bigint,
	coalesce(s.wal_status, '')
FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
WHERE s.slot_type = 'logical'
ORDER BY s.slot_name`

// Read takes one sample of every declared slot.
func (w *Watch) Read(ctx context.Context, at string) models.SlotSample {
	s := models.SlotSample{At: at}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		s.Error = fmt.Sprintf("connect: %v", err)
		return s
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, slotsSQL)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	type found struct {
		st     models.SlotState
		server string
		used   bool
	}
	var all []*found
	for rows.Next() {
		f := &found{}
		var pid int32
		if err := rows.Scan(&f.st.Slot, &f.server, &f.st.Active, &pid, &f.st.HolderApp, &f.st.ConfirmedLSN, &f.st.RestartLSN,
			&s.CurrentLSN, &f.st.LagBytes, &f.st.RetainedBytes, &f.st.WALStatus); err != nil {
			s.Error = err.Error()
			return s
		}
		f.st.HolderPID, f.st.Exists = int(pid), true
		all = append(all, f)
	}
	if err := rows.Err(); err != nil {
		s.Error = err.Error()
		return s
	}
	if s.CurrentLSN == "" {
		_ = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s.CurrentLSN)
	}
	for _, d := range w.decls {
		st := models.SlotState{DB: d.DB, Slot: d.Name}
		for _, f := range all {
			if f.used || f.server != d.Server || (d.Name != "" && f.st.Slot != d.Name) {
				continue
			}
			f.used = true
			st = f.st
			st.DB = d.DB
			if slices.Contains(d.Instances, st.HolderApp) && st.Active {
				st.Holder = st.HolderApp
			}
			break
		}
		s.Slots = append(s.Slots, st)
	}
	return s
}

// Sample records one sample as an observer op: Info during the run, State
// at observation.
func (w *Watch) Sample(ctx context.Context, rec *models.Recorder, at string) models.SlotSample {
	s := w.Read(ctx, at)
	typ := models.Info
	if at == models.SlotsAtObserve {
		typ = models.State
	}
	rec.Record(models.ProcObserver, typ, models.FSlots, "", s)
	return s
}

// Start samples every interval into rec until the returned stop is
// called; stop waits for the sampler to end.
func (w *Watch) Start(rec *models.Recorder, every time.Duration) (stop func()) {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s := w.Read(ctx, models.SlotsDuringRun)
			if ctx.Err() != nil {
				return // stopped mid-read: not a sample of the server
			}
			rec.Record(models.ProcObserver, models.Info, models.FSlots, "", s)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// The fault kinds' view (faults.Slots).
var _ faults.Slots = (*Watch)(nil)

// Slot implements faults.Slots: the state of db's slot now.
func (w *Watch) Slot(ctx context.Context, db string) (faults.SlotView, error) {
	s := w.Read(ctx, models.SlotsDuringRun)
	if s.Error != "" {
		return faults.SlotView{}, fmt.Errorf("read the slots: %s", s.Error)
	}
	for _, st := range s.Slots {
		if st.DB == db {
			return faults.SlotView{DB: db, Name: st.Slot, Exists: st.Exists, Active: st.Active, Holder: st.Holder, PID: st.HolderPID,
				ConfirmedLSN: st.ConfirmedLSN, CurrentLSN: s.CurrentLSN, LagBytes: st.LagBytes}, nil
		}
	}
	return faults.SlotView{}, fmt.Errorf("no slot declared in database %s", db)
}

// Instances implements faults.Slots: the instances that compete for db's
// slot, in declaration order.
func (w *Watch) Instances(db string) []string {
	for _, d := range w.decls {
		if d.DB == db {
			return d.Instances
		}
	}
	return nil
}
