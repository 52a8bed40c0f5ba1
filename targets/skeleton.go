package targets

import (
	"fmt"
	"strconv"
	"strings"
)

// This file is the one place the manifest skeleton of `sagachaos init` is
// made from: a tree of fields, each with the comment written above it. When
// a field is added to Manifest, add it here too; TestSkeletonCoversManifest
// fails until every JSON field of today's manifest appears.

// node is one value of the skeleton: an object (fields), an array (items)
// or a scalar (lit, already JSON).
type node struct {
	fields []field
	items  []node
	array  bool
	lit    string
}

type field struct {
	key     string
	comment string // one or more lines, each written as "// …"
	val     node
}

func obj(fs ...field) node { return node{fields: fs} }
func arr(ns ...node) node  { return node{items: ns, array: true} }
func str(s string) node    { return node{lit: strconv.Quote(s)} }
func num(n int) node       { return node{lit: strconv.Itoa(n)} }
func yes() node            { return node{lit: "true"} }
func strs(ss ...string) node {
	var ns []node
	for _, s := range ss {
		ns = append(ns, str(s))
	}
	return arr(ns...)
}
func f(key, comment string, v node) field { return field{key, comment, v} }

func skeleton(name string) node {
	outbox := "SELECT id, event_id, aggregate_id, seq, type, topic, published_at IS NOT NULL AS published FROM outbox ORDER BY id"
	inbox := "SELECT consumer, event_id, aggregate_id, source, type, seq, position FROM inbox ORDER BY position"
	return obj(
		f("name", "The target's name, in run directories and reports.", str(name)),
		f("description", "One line about the service.", str("TODO: what this service does")),
		f("build", "Optional: built once before the first run, from the module root above this file\n(the directory with go.mod). {{bin}} is where the harness wants the binaries.",
			obj(f("command", "", strs("go", "build", "-o", "{{bin}}/"+name, "./cmd/"+name)))),
		f("databases", "PostgreSQL databases the harness creates fresh for every run (one per service).", strs("orders", "stock")),
		f("topics", "Kafka topics the harness creates for every run.",
			arr(obj(f("name", "", str("orders")), f("partitions", "", num(4))),
				obj(f("name", "", str("stock")), f("partitions", "", num(4))))),
		f("processes", "Every process the harness starts, each a real OS process it may crash, pause and\n"+
			"restart. In command and env: {{listen}} (a free 127.0.0.1 port for this instance),\n"+
			"{{db:NAME}}, {{kafka}}, {{url:gateway|carrier|mailer}} (all through this instance's own\n"+
			"proxied link), {{instance}}, {{stock}}, {{bin}}. See docs/target-contract.md.",
			arr(
				obj(
					f("name", "Instances are NAME, or NAME-1…NAME-n with replicas.", str("api")),
					f("role", "api (serves the workload API), relay (publishes outbox rows; no consumer group),\nconsumer or worker.", str("api")),
					f("command", "", strs("{{bin}}/"+name, "api")),
					f("env", "", obj(
						f("DATABASE_URL", "", str("{{db:orders}}")),
						f("KAFKA_BROKERS", "", str("{{kafka}}")),
						f("LISTEN_ADDR", "", str("{{listen}}")))),
					f("health", "Polled on {{listen}} until it answers 2xx.", str("/healthz")),
					f("depends", "Each gets its own link (api→postgres, …) that faults cut or slow:\npostgres, kafka, gateway, carrier, mailer.", strs("postgres", "kafka")),
					f("consumes", "What this process consumes (rewind targets are the processes with consumes):\n"+
						"consumer = the applied query's consumer column, group = the Kafka group id,\n"+
						"topics = manifest topic names, types = record types it applies (empty: all).",
						arr(obj(
							f("consumer", "", str("api")),
							f("group", "", str("api")),
							f("topics", "", strs("stock")),
							f("types", "", strs("StockReserved", "StockReserveFailed"))))),
				),
				obj(
					f("name", "", str("stock")),
					f("role", "", str("consumer")),
					f("command", "", strs("{{bin}}/"+name, "stock")),
					f("env", "", obj(
						f("DATABASE_URL", "", str("{{db:stock}}")),
						f("KAFKA_BROKERS", "", str("{{kafka}}")),
						f("LISTEN_ADDR", "", str("{{listen}}")),
						f("INITIAL_STOCK", "The run's initial stock, as JSON {\"sku-1\": 10, …}.", str("{{stock}}")))),
					f("health", "", str("/healthz")),
					f("depends", "", strs("postgres", "kafka")),
					f("consumes", "", arr(obj(
						f("consumer", "", str("stock")),
						f("group", "", str("stock")),
						f("topics", "", strs("orders")),
						f("types", "", strs("ReserveStock", "ReleaseStock"))))),
				),
				obj(
					f("name", "", str("relay")),
					f("role", "", str("relay")),
					f("replicas", "Competing instances relay-1, relay-2.", num(2)),
					f("command", "", strs("{{bin}}/"+name, "relay")),
					f("env", "", obj(
						f("RELAY_DATABASES", "", str("orders={{db:orders}} stock={{db:stock}}")),
						f("KAFKA_BROKERS", "", str("{{kafka}}")),
						f("LISTEN_ADDR", "", str("{{listen}}")))),
					f("health", "", str("/healthz")),
					f("depends", "", strs("postgres", "kafka")),
				),
			)),
		f("api", "The process that serves POST /orders, GET /orders/{id} and GET /orders.", obj(f("process", "", str("api")))),
		f("observe", "SQL the observer runs once after quiescence; the columns are fixed (docs/target-contract.md).",
			obj(
				f("stock", "Columns sku, available, reserved.", obj(
					f("db", "", str("stock")),
					f("sql", "", str("SELECT sku, available, reserved FROM stock ORDER BY sku")))),
				f("outbox", "One query per database with an outbox. complete: the target deletes no row\nthis query returns during a run, so a missing row is evidence.",
					arr(obj(f("db", "", str("orders")), f("sql", "", str(outbox)), f("complete", "", yes())),
						obj(f("db", "", str("stock")), f("sql", "", str(outbox)), f("complete", "", yes())))),
				f("applied", "One query per consumer database: what each consumer applied, in order.",
					arr(obj(f("db", "", str("orders")), f("sql", "", str(inbox))),
						obj(f("db", "", str("stock")), f("sql", "", str(inbox))))),
			)),
		f("failpoints", "Optional: a command printing the failpoint catalogue as JSON\n[{\"name\", \"component\", \"description\"}] (crash points the nemesis can arm).",
			strs("{{bin}}/"+name, "--list-failpoints")),
		f("mutants", "Optional: planted bugs your service can switch on through SAGACHAOS_MUTANT, to prove\nthe harness catches them: [{\"name\", \"description\", \"checkers\", \"scenarios\"}].",
			arr()),
	)
}

// Skeleton is the commented manifest `sagachaos init` writes for a new
// target: today's fields with placeholder values that load as they are
// (ParseManifest accepts whole-line // comments), each with what it means.
func Skeleton(name string) []byte {
	var b strings.Builder
	b.WriteString("// sagachaos manifest: how the harness starts and observes your service.\n")
	b.WriteString("// Fill in the TODOs, then: sagachaos run --target ./sagachaos.json --scenario calm --seed 1\n")
	b.WriteString("// Lines starting with // are comments. The contract: docs/target-contract.md.\n")
	write(&b, skeleton(name), 0)
	b.WriteString("\n")
	return []byte(b.String())
}

func write(b *strings.Builder, n node, depth int) {
	pad := strings.Repeat("  ", depth+1)
	switch {
	case n.array && len(n.items) == 0:
		b.WriteString("[]")
	case n.array && allScalar(n.items):
		b.WriteString("[")
		for i, it := range n.items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(it.lit)
		}
		b.WriteString("]")
	case n.array:
		b.WriteString("[\n")
		for i, it := range n.items {
			b.WriteString(pad)
			write(b, it, depth+1)
			if i < len(n.items)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "]")
	case n.lit != "":
		b.WriteString(n.lit)
	default:
		b.WriteString("{\n")
		for i, fl := range n.fields {
			if fl.comment != "" {
				for _, line := range strings.Split(fl.comment, "\n") {
					fmt.Fprintf(b, "%s// %s\n", pad, line)
				}
			}
			fmt.Fprintf(b, "%s%q: ", pad, fl.key)
			write(b, fl.val, depth+1)
			if i < len(n.fields)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "}")
	}
}

func allScalar(ns []node) bool {
	for _, n := range ns {
		if n.array || n.lit == "" {
			return false
		}
	}
	return true
}

// stripComments blanks whole-line // comments (the line's first non-blank
// characters), keeping line numbers for decode errors. A JSON string cannot
// span lines, so such a line is never inside one.
func stripComments(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "//") {
			lines[i] = ""
		}
	}
	return []byte(strings.Join(lines, "\n"))
}
