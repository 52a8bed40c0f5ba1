package targets

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Postgres is what a target needs of the PostgreSQL server (manifest
// "postgres"): settings every provider must give it. The embedded cluster
// and a testcontainers container start with them; an external server (a
// DSN) is checked with SHOW, and one that lacks a setting is refused (exit
// code 2, naming it).
type Postgres struct {
	// Settings are server settings by name, with the value the target
	// needs ("wal_level": "logical"). A setting whose name starts with
	// "max_" and whose value is an integer is a minimum: a server with more
	// satisfies it; every other value must match SHOW's answer (case
	// insensitively).
	Settings map[string]string `json:"settings,omitempty"`
}

// Slot is one logical replication slot a process holds (manifest
// processes[].slots): the harness samples its state into the history, and
// the CDC fault kinds aim at the instance holding it. The holder is found
// by the application_name of the walsender holding the slot, which must be
// the instance name (SAGACHAOS_INSTANCE).
type Slot struct {
	// DB is one of the manifest's databases.
	DB string `json:"db"`
	// Name is the slot's name; empty: the logical slot of DB, whatever its
	// name (a process that names its slot after its database, as the
	// reference's CDC relay does, needs nothing else).
	Name string `json:"name,omitempty"`
}

// How an observe.outbox query says whether a row was published.
const (
	// PublishedColumn (the default): the query's published column, which
	// the relay sets once the broker acknowledged the row.
	PublishedColumn = "column"
	// PublishedLog: no column; a row is published once its event_id is in
	// the Kafka log. A CDC relay never writes to its outbox, so only the
	// log (and the outbox-drains rule) can say a row was delivered.
	PublishedLog = "log"
)

var settingName = regexp.MustCompile(`^[a-z_][a-z0-9_.]*$`)

// validatePostgres checks the postgres section and the processes' slots.
func (m *Manifest) validatePostgres() error {
	if m.Postgres != nil {
		names := make([]string, 0, len(m.Postgres.Settings))
		for k := range m.Postgres.Settings {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if !settingName.MatchString(k) {
				return fmt.Errorf("field postgres.settings: %q is not a setting name (lower case, like wal_level)", k)
			}
			if strings.TrimSpace(m.Postgres.Settings[k]) == "" {
				return fmt.Errorf("field postgres.settings.%s: empty value", k)
			}
		}
	}
	dbs := map[string]bool{}
	for _, d := range m.Databases {
		dbs[d] = true
	}
	for i, p := range m.Processes {
		seen := map[string]bool{}
		for j, s := range p.Slots {
			field := fmt.Sprintf("processes[%d].slots[%d]", i, j)
			if !dbs[s.DB] {
				return fmt.Errorf("field %s.db: %q is not one of the databases", field, s.DB)
			}
			key := s.DB + "/" + s.Name
			if seen[key] {
				return fmt.Errorf("field %s: slot %q declared twice", field, key)
			}
			seen[key] = true
			if !dependsOn(p, "postgres") {
				return fmt.Errorf("field %s: process %s holds a slot but does not list postgres in depends", field, p.Name)
			}
			if lvl := m.PostgresSetting("wal_level"); lvl != "logical" {
				return fmt.Errorf("field %s: a replication slot needs wal_level=logical; declare it: \"postgres\": {\"settings\": {\"wal_level\": \"logical\"}}", field)
			}
		}
	}
	for i, q := range m.Observe.Outbox {
		switch q.Published {
		case "", PublishedColumn, PublishedLog:
		default:
			return fmt.Errorf("field observe.outbox[%d].published: %q (known: column, log)", i, q.Published)
		}
	}
	return nil
}

// PostgresSetting is the value the manifest requires for a setting ("" if
// none).
func (m *Manifest) PostgresSetting(name string) string {
	if m.Postgres == nil {
		return ""
	}
	return m.Postgres.Settings[name]
}

// PostgresSettings is the manifest's required settings (nil if none).
func (m *Manifest) PostgresSettings() map[string]string {
	if m.Postgres == nil {
		return nil
	}
	return m.Postgres.Settings
}

func dependsOn(p Process, dep string) bool {
	for _, d := range p.Depends {
		if d == dep {
			return true
		}
	}
	return false
}
