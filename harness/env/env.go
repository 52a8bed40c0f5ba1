package env

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config selects the providers of one run. The zero value is the embedded
// default (local PostgreSQL, kfake, no databases, no topics) unless the
// environment names a server: SAGACHAOS_POSTGRES_DSN alone selects the
// "dsn" provider and SAGACHAOS_KAFKA_BROKERS alone the "brokers" one, as
// pgx's PGHOST or testcontainers' DOCKER_HOST would. A provider named
// explicitly wins over the environment.
type Config struct {
	Postgres string // "local", "dsn", "testcontainers"; "": dsn if a DSN is given or in the environment, else local
	// PostgresDSN is the server of "dsn" (giving one selects "dsn"); empty:
	// SAGACHAOS_POSTGRES_DSN.
	PostgresDSN string
	// PostgresDSNFrom names where PostgresDSN came from (a flag such as
	// "--postgres-dsn"), for messages; empty: "the DSN". A DSN read from
	// the environment is named after the variable.
	PostgresDSNFrom string
	Kafka           string   // "kfake", "brokers", "testcontainers"; "": brokers if brokers are given or in the environment, else kfake
	KafkaBrokers    []string // for "brokers" (giving them selects it); empty: SAGACHAOS_KAFKA_BROKERS, comma-separated
	// KafkaBrokersFrom names where KafkaBrokers came from, like
	// PostgresDSNFrom.
	KafkaBrokersFrom string
	// Images for "testcontainers" (default DefaultPostgresImage,
	// DefaultKafkaImage: the official ones, from a registry).
	PostgresImage string
	KafkaImage    string
	// Dir is the run directory: postgres.log goes here. Data dirs do not:
	// they go under /dev/shm (tmpfs) or os.TempDir and are removed on Close. Empty: logs go
	// into the data dir and vanish with it.
	Dir       string
	Databases []string // created fresh; names as the target knows them
	Topics    []Topic  // created fresh; names as the target knows them
	Logger    *slog.Logger

	// PostgresSettings are server settings the target needs (the
	// manifest's postgres.settings), applied or checked by every provider
	// (postgres_settings.go).
	PostgresSettings map[string]string
}

// Resolve fills in the providers as Up will use them: the explicit choice,
// else what the given DSN or brokers, or the environment (lookup, usually
// os.LookupEnv), select, else the embedded defaults. A DSN or broker list
// given alongside a provider that does not use it is an error: it would be
// silently ignored.
func (c Config) Resolve(lookup func(string) (string, bool)) (Config, error) {
	env := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	if c.PostgresDSN != "" {
		if c.PostgresDSNFrom == "" {
			c.PostgresDSNFrom = "the DSN"
		}
		switch c.Postgres {
		case "":
			c.Postgres = "dsn"
		case "dsn":
		default:
			return c, unavailable(fmt.Sprintf("postgres: %s is given but --postgres %s does not use it", c.PostgresDSNFrom, c.Postgres),
				"drop one of them (a DSN alone selects --postgres dsn)", nil)
		}
	} else if dsn := env(EnvPostgresDSN); dsn != "" && (c.Postgres == "" || c.Postgres == "dsn") {
		c.Postgres, c.PostgresDSN, c.PostgresDSNFrom = "dsn", dsn, EnvPostgresDSN
	}
	if c.Postgres == "" {
		c.Postgres = "local"
	}
	if len(c.KafkaBrokers) > 0 {
		if c.KafkaBrokersFrom == "" {
			c.KafkaBrokersFrom = "the broker list"
		}
		switch c.Kafka {
		case "":
			c.Kafka = "brokers"
		case "brokers":
		default:
			return c, unavailable(fmt.Sprintf("kafka: %s is given but --kafka %s does not use it", c.KafkaBrokersFrom, c.Kafka),
				"drop one of them (brokers alone select --kafka brokers)", nil)
		}
	} else if bs := SplitBrokers(env(EnvKafkaBrokers)); len(bs) > 0 && (c.Kafka == "" || c.Kafka == "brokers") {
		c.Kafka, c.KafkaBrokers, c.KafkaBrokersFrom = "brokers", bs, EnvKafkaBrokers
	}
	if c.Kafka == "" {
		c.Kafka = "kfake"
	}
	return c, nil
}

// SplitBrokers splits a comma-separated broker list, dropping blanks.
func SplitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Topic is a Kafka topic to create for the run.
type Topic struct {
	Name       string
	Partitions int32
}

type kafkaProvider interface {
	brokers() []string
	close() error
}

// Env is a running environment. All methods are safe for concurrent use.
type Env struct {
	cfg    Config
	log    *slog.Logger
	runID  string
	dbs    map[string]string // target name → server-side name
	prefix string            // topic prefix ("" for kfake)

	pg    pgProvider
	kafka kafkaProvider
	kf    *kfakeKafka // nil unless Kafka is "kfake"
	links *links

	mu       sync.Mutex
	kfDoors  map[string]bool
	closeErr error
	closed   atomic.Bool
	once     sync.Once
}

// Up brings the environment up. On error everything already started is torn
// down; errors.Is(err, ErrUnavailable) marks bad input or a missing part.
func Up(ctx context.Context, cfg Config) (_ *Env, err error) {
	cfg, err = cfg.Resolve(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	// Several processes of a manifest may name one database: create it once.
	cfg.Databases = slices.Compact(slices.Sorted(slices.Values(cfg.Databases)))
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	e := &Env{cfg: cfg, log: log, runID: hex.EncodeToString(rb[:]), dbs: map[string]string{}, kfDoors: map[string]bool{}}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("env: run dir: %w", err)
		}
	}
	e.links = newLinks()

	// Validate both choices before starting anything slow.
	switch cfg.Postgres {
	case "local", "dsn", "testcontainers":
	default:
		return nil, unavailable(fmt.Sprintf("postgres: unknown provider %q", cfg.Postgres), "use local, dsn or testcontainers", nil)
	}
	switch cfg.Kafka {
	case "kfake", "brokers", "testcontainers":
	default:
		return nil, unavailable(fmt.Sprintf("kafka: unknown provider %q", cfg.Kafka), "use kfake, brokers or testcontainers", nil)
	}

	// Kafka first: kfake is ~1 ms and an unreachable broker list fails fast.
	topicPrefix := "sc_" + e.runID + "_"
	switch cfg.Kafka {
	case "kfake":
		k, err := startKfake(cfg.Topics)
		if err != nil {
			return nil, err
		}
		e.kf, e.kafka = k, k
	case "brokers":
		e.prefix = topicPrefix
		k, err := openExternalKafka(ctx, "brokers", cfg.KafkaBrokers, cfg.KafkaBrokersFrom, cfg.Topics, e.prefix)
		if err != nil {
			return nil, err
		}
		e.kafka = k
	case "testcontainers":
		e.prefix = topicPrefix
		k, err := startContainerKafka(ctx, cfg.KafkaImage, e.runID, cfg.Topics, e.prefix, log)
		if err != nil {
			return nil, err
		}
		e.kafka = k
	}

	switch cfg.Postgres {
	case "local":
		p, err := startLocalPG(ctx, cfg.Dir, log, cfg.PostgresSettings)
		if err != nil {
			return nil, err
		}
		e.pg = p
		if err := checkSettings(ctx, p.dsn("postgres"), cfg.PostgresSettings, "the embedded cluster", "report this: the embedded cluster was started with them"); err != nil {
			return nil, err
		}
		for _, d := range cfg.Databases {
			e.dbs[d] = d
		}
		if err := createDatabases(ctx, p.dsn("postgres"), cfg.Databases); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
	case "dsn", "testcontainers":
		var d *dsnPG
		if cfg.Postgres == "dsn" {
			d, err = openDSNPG(ctx, cfg.PostgresDSN, cfg.PostgresDSNFrom)
			if err != nil {
				return nil, err
			}
			e.pg = d
			// Before anything is created on the user's server.
			if err := checkSettings(ctx, d.base, cfg.PostgresSettings, "the server of DSN "+redact(d.base),
				"change them on that server, or use --postgres local, which starts with the manifest's settings"); err != nil {
				return nil, err
			}
		} else {
			c, err := startContainerPG(ctx, cfg.PostgresImage, e.runID, log, cfg.PostgresSettings)
			if err != nil {
				return nil, err
			}
			e.pg, d = c, c.dsnPG
			if err := checkSettings(ctx, d.base, cfg.PostgresSettings, "the PostgreSQL container", "the image must accept them as server arguments"); err != nil {
				return nil, err
			}
		}
		var actual []string
		for _, n := range cfg.Databases {
			a := "sc_" + e.runID + "_" + n
			e.dbs[n] = a
			actual = append(actual, a)
		}
		// Recorded before creating so a partial failure still drops them.
		d.created = actual
		if err := createDatabases(ctx, d.dsn(dbOf(d.base)), actual); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	log.Info("env up", "postgres", e.pg.describe(), "kafka", strings.Join(e.kafka.brokers(), ","), "run", e.runID)
	return e, nil
}

// dbOf is the database part of a postgres URL (the admin database).
func dbOf(dsn string) string {
	i := strings.Index(dsn, "://")
	rest := dsn[i+3:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		db := rest[j+1:]
		if k := strings.IndexByte(db, '?'); k >= 0 {
			db = db[:k]
		}
		if db != "" {
			return db
		}
	}
	return "postgres"
}

// Close tears down links, Kafka and PostgreSQL (and their temp dirs). It is
// idempotent and returns the first call's error on every call.
func (e *Env) Close() error {
	e.once.Do(func() {
		e.closed.Store(true)
		var errs []error
		if e.links != nil {
			e.links.close()
		}
		if e.kafka != nil {
			if err := e.kafka.close(); err != nil {
				errs = append(errs, err)
			}
		}
		if e.pg != nil {
			if err := e.pg.close(); err != nil {
				errs = append(errs, err)
			}
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// RunID is the per-run identifier used in database and topic prefixes.
func (e *Env) RunID() string { return e.runID }

// Describe writes every address and link, one per line.
func (e *Env) Describe(w io.Writer) {
	fmt.Fprintf(w, "run        %s\n", e.runID)
	fmt.Fprintf(w, "postgres   %s\n", e.pg.describe())
	for _, n := range sortedKeys(e.dbs) {
		fmt.Fprintf(w, "  db %-12s %s\n", n, redact(e.DirectDSN(n)))
	}
	kind := e.cfg.Kafka
	fmt.Fprintf(w, "kafka      %s %s\n", kind, strings.Join(e.DirectBrokers(), ","))
	if e.kf != nil {
		fmt.Fprintf(w, "  links    per component: a client bootstrapped through C→kafka is told the broker is at that link\n")
	} else {
		fmt.Fprintf(w, "  links    none: external brokers advertise their own addresses, Kafka traffic is not proxied\n")
	}
	for _, t := range e.cfg.Topics {
		fmt.Fprintf(w, "  topic %-12s %s (%d partitions)\n", t.Name, e.TopicName(t.Name), max(t.Partitions, 1))
	}
	for _, l := range e.Links() {
		state := "up"
		if !l.Enabled() {
			state = "DOWN"
		}
		fmt.Fprintf(w, "link %-24s %s → %s (%s)\n", l.Name(), l.Listen(), l.Upstream(), state)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// --- PostgreSQL ---

func (e *Env) actualDB(db string) string {
	if a, ok := e.dbs[db]; ok {
		return a
	}
	return db
}

// DirectDSN is a URL for db that crosses no link: for the harness's own
// observer, which must see the database even while links are cut.
func (e *Env) DirectDSN(db string) string { return e.pg.dsn(e.actualDB(db)) }

// PostgresLink creates (or returns) the link "component→postgres".
func (e *Env) PostgresLink(component string) (*Link, error) {
	if e.closed.Load() {
		return nil, errors.New("env: closed")
	}
	return e.links.get(component+"→postgres", e.pg.addr())
}

// ProxiedDSN is a URL for db through component's own postgres link.
func (e *Env) ProxiedDSN(component, db string) (string, error) {
	l, err := e.PostgresLink(component)
	if err != nil {
		return "", err
	}
	return withHostPort(e.DirectDSN(db), l.Listen())
}

// CrashPostgres SIGKILLs the postmaster and its backends. Only "local";
// other providers return ErrUnsupported.
func (e *Env) CrashPostgres(ctx context.Context) error { return e.pg.crash(ctx) }

// RestartPostgres (re)starts PostgreSQL on the same port after a crash (or
// kills and restarts a running one). It returns once the server accepts
// connections; crash recovery has then replayed every acknowledged commit.
func (e *Env) RestartPostgres(ctx context.Context) error { return e.pg.restart(ctx) }

// PostgresPID is the postmaster's pid, 0 unless "local".
func (e *Env) PostgresPID() int {
	if p, ok := e.pg.(*localPG); ok {
		return p.pid()
	}
	return 0
}

// PostgresAddr is the server's direct host:port.
func (e *Env) PostgresAddr() string { return e.pg.addr() }

// --- Kafka ---

// DirectBrokers is the broker list that crosses no link (observer, admin).
func (e *Env) DirectBrokers() []string { return e.kafka.brokers() }

// KafkaBrokersFor is component's broker list. With kfake it goes through
// the per-component link "component→kafka", and every broker address the
// cluster advertises on it points back at that link. With "brokers" and
// "testcontainers" it is the direct list: external brokers advertise their
// own addresses, so their traffic cannot be interposed (see the package doc).
func (e *Env) KafkaBrokersFor(component string) ([]string, error) {
	if e.closed.Load() {
		return nil, errors.New("env: closed")
	}
	if e.kf == nil {
		return e.DirectBrokers(), nil
	}
	name := component + "→kafka"
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.links.lookup(name); l != nil {
		return []string{l.Listen()}, nil
	}
	var advertise atomic.Int32
	door, err := e.kf.ln.door(&advertise)
	if err != nil {
		return nil, fmt.Errorf("kafka link %s: %w", name, err)
	}
	l, err := e.links.get(name, door)
	if err != nil {
		return nil, err
	}
	advertise.Store(portOf(l.Listen()))
	return []string{l.Listen()}, nil
}

// KafkaLink is the link "component→kafka", creating it like KafkaBrokersFor.
// ErrUnsupported unless Kafka is kfake.
func (e *Env) KafkaLink(component string) (*Link, error) {
	if e.kf == nil {
		return nil, fmt.Errorf("kafka link %s→kafka with provider %s: %w", component, e.cfg.Kafka, ErrUnsupported)
	}
	if _, err := e.KafkaBrokersFor(component); err != nil {
		return nil, err
	}
	return e.links.lookup(component + "→kafka"), nil
}

// KafkaCluster is the kfake cluster (for Fault and ControlKey hooks), nil
// unless Kafka is "kfake".
func (e *Env) KafkaCluster() *kfake.Cluster {
	if e.kf == nil {
		return nil
	}
	return e.kf.c
}

// TopicName is the actual topic name for name (prefixed for external
// clusters, so runs sharing a cluster do not meet).
func (e *Env) TopicName(name string) string { return e.prefix + name }

// --- links ---

// NewLink creates (or returns) a generic link, e.g. "payment→gateway"
// toward a world server or "client→orders" toward a target's HTTP API.
func (e *Env) NewLink(name, upstream string) (*Link, error) {
	if e.closed.Load() {
		return nil, errors.New("env: closed")
	}
	return e.links.get(name, upstream)
}

// Link returns the link called name, nil if none.
func (e *Env) Link(name string) *Link { return e.links.lookup(name) }

// Links returns every link sorted by name.
func (e *Env) Links() []*Link { return e.links.all() }

// HealAll brings every link up and removes every toxic.
func (e *Env) HealAll() error {
	var errs []error
	for _, l := range e.links.all() {
		if err := l.Heal(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
