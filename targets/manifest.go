package targets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// Manifest describes a target (docs/target-contract.md).
type Manifest struct {
	// Schema is for editors: the path or URL of docs/manifest.schema.json.
	Schema      string `json:"$schema,omitempty"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Build, when set, is run once (from the manifest's directory's module
	// root, or the manifest's directory outside a module) before the first
	// run; "{{bin}}" is the harness's binary dir, "{{dir}}" the manifest's.
	Build     *Build    `json:"build,omitempty"`
	Databases []string  `json:"databases"`
	Topics    []Topic   `json:"topics"`
	Processes []Process `json:"processes"`
	API       API       `json:"api"`
	Observe   Observe   `json:"observe"`
	// Postgres is what the target needs of the server (postgres.go).
	Postgres *Postgres `json:"postgres,omitempty"`
	// Failpoints is a command that prints the target's failpoint catalogue
	// as JSON ([]Failpoint) on stdout.
	Failpoints []string `json:"failpoints,omitempty"`
	// Mutants lists the planted bugs the target can switch on through
	// SAGACHAOS_MUTANT.
	Mutants []Mutant `json:"mutants,omitempty"`

	// The domain as data (domain.go): the saga, the world providers, the
	// workload and the resources, declared here or in the Domain file (the
	// manifest's own sections win). A manifest with none of them is the
	// order domain's (targets/domains/order.json); one without a saga is
	// an outbox-only target.
	Domain    string            `json:"domain,omitempty"`
	Saga      *models.SagaSpec  `json:"saga,omitempty"`
	World     []models.Provider `json:"world,omitempty"`
	Workload  *models.Workload  `json:"workload,omitempty"`
	Resources []models.Resource `json:"resources,omitempty"`
	// Seq says where per-aggregate order comes from: SeqHeader (the
	// default: every record carries a seq header) or SeqOutbox (no seq
	// header; an aggregate's outbox rows, by id, are in saga order).
	Seq string `json:"seq,omitempty"`

	// Dir is the directory the manifest was read from, Path the file (not
	// serialised).
	Dir  string `json:"-"`
	Path string `json:"-"`
}

// Build is a command that builds the target's binaries.
type Build struct {
	Command []string `json:"command"`
}

// Topic is a Kafka topic the target uses; the harness creates it.
type Topic struct {
	Name       string `json:"name"`
	Partitions int32  `json:"partitions"`
}

// Process is one component of the target. Replicas > 1 starts competing
// instances named "<name>-1", "<name>-2", …; a single replica is named
// "<name>".
type Process struct {
	Name string `json:"name"`
	// Role is what the process is for (docs/target-contract.md): "api"
	// (serves the workload API), "relay" (publishes outbox rows; owns no
	// consumer group), "consumer", "worker"; empty: unspecified.
	Role     string            `json:"role,omitempty"`
	Command  []string          `json:"command"`
	Env      map[string]string `json:"env,omitempty"`
	Replicas int               `json:"replicas,omitempty"`
	// Health is the HTTP path polled on the instance's {{listen}} address
	// until it answers 2xx.
	Health string `json:"health,omitempty"`
	// Depends lists the dependencies the instance gets its own proxied
	// link to: "postgres", "kafka", "gateway", "carrier", "mailer".
	Depends []string `json:"depends,omitempty"`
	// Consumes declares what the process consumes; only processes that
	// declare consumer groups are rewind targets.
	Consumes []Consume `json:"consumes,omitempty"`
	// Slots are the logical replication slots the process holds (a CDC
	// relay; postgres.go).
	Slots []Slot `json:"slots,omitempty"`
}

// Consume is one consumer a process runs.
type Consume struct {
	// Consumer is the value of the applied query's consumer column for the
	// records this consumer applies.
	Consumer string `json:"consumer"`
	// Group is the Kafka consumer group id (what a rewind rewinds).
	Group string `json:"group,omitempty"`
	// Topics are manifest topic names.
	Topics []string `json:"topics"`
	// Types are the record types it applies; records of other types it
	// skips without an applied record. Empty: every record of Topics.
	Types []string `json:"types,omitempty"`
}

// Roles a process may declare.
var knownRoles = map[string]bool{"": true, "api": true, "relay": true, "consumer": true, "worker": true}

// API says which process serves the workload API (POST /orders,
// GET /orders/{id}, GET /orders).
type API struct {
	Process string `json:"process"`
}

// Observe is the SQL the observer runs after quiescence.
type Observe struct {
	// Stock is the order domain's stock query of older manifests (columns
	// sku, available, reserved): the query of the resource "stock".
	Stock *Query `json:"stock,omitempty"`
	// Resources reads each counted resource by name (columns key,
	// available, reserved).
	Resources map[string]Query `json:"resources,omitempty"`
	Outbox    []Query          `json:"outbox,omitempty"`
	Applied   []Query          `json:"applied,omitempty"`
}

// Query is one SQL snapshot against one of the target's databases.
type Query struct {
	DB  string `json:"db"`
	SQL string `json:"sql"`
	// Complete promises the target deletes no row this query returns during
	// a run (e.g. outbox retention is longer than any run), so a missing row
	// is evidence.
	Complete bool `json:"complete,omitempty"`
	// Published says, for an outbox query, how a row's publication is
	// known: "column" (default) or "log" (postgres.go).
	Published string `json:"published,omitempty"`
}

// Failpoint is one named crash point a component declares.
type Failpoint struct {
	Name        string `json:"name"`
	Component   string `json:"component"`
	Description string `json:"description,omitempty"`
	// Kind is "" (or "failpoint") for a point that can be armed, or
	// KindMarker for a reachability marker on a branch of the code: the
	// component logs reaching it (docs/target-contract.md) and it cannot
	// be armed.
	Kind string `json:"kind,omitempty"`
}

// KindMarker is the Kind of a reachability marker.
const KindMarker = "marker"

// IsMarker reports whether f is a reachability marker.
func (f Failpoint) IsMarker() bool { return f.Kind == KindMarker }

// Mutant is one planted bug.
type Mutant struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Checkers    []string `json:"checkers"`
	Scenarios   []string `json:"scenarios"`
}

// MaxReplicas bounds a process's replicas: each is a real OS process with
// its own links, and a typo of a few digits must not start a million.
const MaxReplicas = 64

// LoadManifest reads and validates a manifest file.
func LoadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	dir := "."
	if i := strings.LastIndex(path, "/"); i >= 0 {
		dir = path[:i]
	}
	m, err := parseManifest(b, dir)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	m.Path = path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		m.Dir = path[:i]
	} else {
		m.Dir = "."
	}
	return m, nil
}

// ParseManifest decodes and validates a manifest. Unknown fields are errors,
// so a typo is reported rather than ignored. Whole-line // comments are
// allowed (the skeleton `sagachaos init` writes is commented).
//
// A domain file it names is read relative to the working directory; use
// LoadManifest for a manifest on disk.
func ParseManifest(b []byte) (*Manifest, error) { return parseManifest(b, ".") }

func parseManifest(b []byte, dir string) (*Manifest, error) {
	dec := json.NewDecoder(strings.NewReader(string(stripComments(b))))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode: trailing data after the manifest's JSON object")
	}
	if err := m.resolveDomain(dir); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest for the mistakes the harness cannot recover
// from at run time.
func (m *Manifest) Validate() error {
	if m.Name == "" {
		return errors.New("field name: empty")
	}
	if len(m.Processes) == 0 {
		return errors.New("field processes: no process to start")
	}
	names := map[string]bool{}
	for i, p := range m.Processes {
		if p.Name == "" {
			return fmt.Errorf("field processes[%d].name: empty", i)
		}
		if names[p.Name] {
			return fmt.Errorf("field processes[%d].name: duplicate %q", i, p.Name)
		}
		names[p.Name] = true
		if len(p.Command) == 0 {
			return fmt.Errorf("field processes[%d].command: empty", i)
		}
		if p.Replicas < 0 || p.Replicas > MaxReplicas {
			return fmt.Errorf("field processes[%d].replicas: %d is outside 0..%d", i, p.Replicas, MaxReplicas)
		}
		for j, d := range p.Depends {
			if !m.knownDep(d) {
				return fmt.Errorf("field processes[%d].depends[%d]: unknown dependency %q (known: %s)", i, j, d, strings.Join(m.Dependencies(), ", "))
			}
		}
		if !knownRoles[p.Role] {
			return fmt.Errorf("field processes[%d].role: unknown role %q (known: api, relay, consumer, worker)", i, p.Role)
		}
		if p.Role == "relay" && len(p.Consumes) > 0 {
			return fmt.Errorf("field processes[%d].consumes: a relay owns no consumer group", i)
		}
	}
	topics := map[string]bool{}
	for _, t := range m.Topics {
		topics[t.Name] = true
	}
	for i, p := range m.Processes {
		for j, c := range p.Consumes {
			field := fmt.Sprintf("processes[%d].consumes[%d]", i, j)
			if c.Consumer == "" {
				return fmt.Errorf("field %s.consumer: empty", field)
			}
			if len(c.Topics) == 0 {
				return fmt.Errorf("field %s.topics: empty", field)
			}
			for k, t := range c.Topics {
				if !topics[t] {
					return fmt.Errorf("field %s.topics[%d]: %q is not one of the topics", field, k, t)
				}
			}
		}
	}
	if m.API.Process == "" || !names[m.API.Process] {
		return fmt.Errorf("field api.process: %q is not one of the processes", m.API.Process)
	}
	dbs := map[string]bool{}
	for _, d := range m.Databases {
		dbs[d] = true
	}
	check := func(field string, q Query) error {
		if !dbs[q.DB] {
			return fmt.Errorf("field %s.db: %q is not one of the databases", field, q.DB)
		}
		if strings.TrimSpace(q.SQL) == "" {
			return fmt.Errorf("field %s.sql: empty", field)
		}
		return nil
	}
	if m.Observe.Stock != nil {
		if err := check("observe.stock", *m.Observe.Stock); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(m.Observe.Resources) {
		if err := check("observe.resources."+name, m.Observe.Resources[name]); err != nil {
			return err
		}
	}
	for i, q := range m.Observe.Outbox {
		if err := check(fmt.Sprintf("observe.outbox[%d]", i), q); err != nil {
			return err
		}
	}
	for i, q := range m.Observe.Applied {
		if err := check(fmt.Sprintf("observe.applied[%d]", i), q); err != nil {
			return err
		}
	}
	for i, t := range m.Topics {
		if t.Name == "" || t.Partitions < 1 {
			return fmt.Errorf("field topics[%d]: need a name and partitions ≥ 1", i)
		}
	}
	if err := m.validateDomain(); err != nil {
		return err
	}
	return m.validatePostgres()
}

// Instances returns the instance names of a process: "<name>" for one
// replica, "<name>-1" … "<name>-n" for more.
func (p Process) Instances() []string {
	n := p.Replicas
	if n <= 1 {
		return []string{p.Name}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", p.Name, i+1)
	}
	return out
}
