package targets

import (
	"fmt"
	"strconv"
	"strings"
)

// This file is the one place the manifest skeleton of `sagachaos init` is
// made from: a tree of fields, each with the comment written above it. When
// a field is added to Manifest, add it here too; TestSkeletonCoversManifest
// fails until every JSON field of today's manifest appears (as a key, or
// named in a comment when the example does not use it), and
// TestSkeletonCommentsEveryField until its first appearance says what to
// write there.
//
// The example is a small but real service, kept coherent: orders (the API
// and the saga's orchestrator) and stock (a consumer) with an outbox each,
// two competing relays, a payments gateway and a mailer, an order saga with
// compensatable steps, a pivot charge and a retriable confirmation, and
// stock and money to conserve. The alternative shapes (outbox-only,
// choreographed, status from events) are in the comments.

// node is one value of the skeleton: an object (fields), an array (items)
// or a scalar or compact JSON value written as it is (lit, already JSON).
type node struct {
	fields []field
	items  []node
	array  bool
	lit    string
}

// field is one key of an object with its comment; a field without a key is
// a comment of its own between two keys (note).
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

// raw is JSON written as it is, on one line: small values whose keys the
// comment above explains (a range, a body template's generator node).
func raw(json string) node { return node{lit: json} }
func strs(ss ...string) node {
	var ns []node
	for _, s := range ss {
		ns = append(ns, str(s))
	}
	return arr(ns...)
}
func f(key, comment string, v node) field { return field{key, comment, v} }
func note(comment string) field           { return field{comment: comment} }

// schemaURL is the manifest schema (docs/manifest.schema.json) as the
// skeleton's $schema names it.
const schemaURL = "https://raw.githubusercontent.com/sagachaos/sagachaos/main/docs/manifest.schema.json"

func skeleton(name string) node {
	bin := "{{bin}}/" + name
	outbox := "SELECT id, event_id, aggregate_id, seq, type, topic, published_at IS NOT NULL AS published FROM outbox ORDER BY id"
	inbox := "SELECT consumer, event_id, aggregate_id, source, type, seq, position FROM inbox ORDER BY position"
	return obj(
		f("$schema", "For editors: the schema that completes and checks this file (or a path to your copy of\n"+
			"sagachaos's docs/manifest.schema.json). The harness ignores it.", str(schemaURL)),
		f("name", "The target's name: run directories, reports and the binary cache are keyed by it.", str(name)),
		f("description", "One line saying what the service does, for whoever reads this file next.",
			str("TODO: what this service does (here: orders reserve stock, charge a card and send a confirmation)")),
		f("build", "Optional: built once before the first run, from the module root above this file (the\n"+
			"nearest directory with go.mod). Without it nothing is built.",
			obj(f("command", "An argv, not a shell line (use [\"sh\", \"-c\", \"…\"] for one); write the binaries into\n"+
				"{{bin}}, the harness's cache directory for this target and checkout.",
				strs("go", "build", "-o", bin, "./cmd/"+name)))),
		f("databases", "PostgreSQL databases the harness creates empty for every run, one per service that owns data\n"+
			"(your service creates its tables): orders and stock each keep their own, outbox included.", strs("orders", "stock")),
		f("postgres", "Optional: what your service needs of the PostgreSQL server. Every provider applies it (the\n"+
			"embedded cluster starts with it); an external server without it is refused (exit 2).",
			obj(f("settings", "Server settings by name. A CDC relay needs {\"wal_level\": \"logical\"} and enough\n"+
				"max_replication_slots and max_wal_senders; an integer max_* value is a minimum.", obj()))),
		f("topics", "Kafka topics the harness creates for every run: here one per service that publishes.",
			arr(obj(
				f("name", "Processes learn the name a run gives it from {{topic:NAME}} (real brokers get a prefix).", str("orders")),
				f("partitions", "More than one, so a relay that publishes without the aggregate id as key is caught\n"+
					"reordering one order's events.", num(4))),
				obj(f("name", "", str("stock")), f("partitions", "", num(4))))),
		f("processes", "Every process the harness starts: each instance is a real OS process in its own process\n"+
			"group, which the nemesis may crash, pause and restart (a dead one is restarted).",
			arr(
				obj(
					f("name", "Instances are NAME, or NAME-1…NAME-n with replicas; links and faults are named after them.", str("orders")),
					f("role", "api serves the workload (api.process), relay publishes outbox rows (no consumes),\n"+
						"consumer or worker: the nemesis aims its faults by role.", str("api")),
					f("command", "Run in the run directory (its output goes to <instance>.log): {{bin}} is where build\n"+
						"wrote, {{dir}} this file's directory, {{instance}} the instance's name.", strs(bin, "orders")),
					f("env", "Added to what the harness sets: SAGACHAOS_INSTANCE, SAGACHAOS_FAILPOINTS,\n"+
						"SAGACHAOS_FAILPOINT_LOG, SAGACHAOS_MUTANT and LISTEN_ADDR. Values may use templates.",
						obj(
							f("DATABASE_URL", "{{db:NAME}}: database NAME through this instance's own link to postgres (postgres in\n"+
								"depends), so a fault can cut this one instance off.", str("{{db:orders}}")),
							f("KAFKA_BROKERS", "{{kafka}}: the brokers, through this instance's link to kafka (kafka in depends).", str("{{kafka}}")),
							f("TOPIC_ORDERS", "{{topic:NAME}}: the run's name of topic NAME; read topic names from here, not constants.", str("{{topic:orders}}")),
							f("TOPIC_STOCK", "The topic stock publishes to, which orders consumes.", str("{{topic:stock}}")),
							f("LISTEN_ADDR", "{{listen}}: a free 127.0.0.1 port for this instance's HTTP server (health, the API).", str("{{listen}}")),
							f("GATEWAY_URL", "{{url:PROVIDER}}: a provider of world, through this instance's link to it (PROVIDER in\n"+
								"depends); its actions are POST <url><path>. Orders charges and refunds here.", str("{{url:gateway}}")),
							f("MAILER_URL", "The mailer the confirm step e-mails through.", str("{{url:mailer}}")))),
					f("health", "Polled on {{listen}} until it answers 2xx; an instance that exits before is a target\n"+
						"that crashed on start (exit 2, not a verdict).", str("/healthz")),
					f("depends", "Each gets its own proxied link (orders→postgres, orders→gateway, …) that faults cut, slow\n"+
						"or make lossy: postgres, kafka or a provider of world.", strs("postgres", "kafka", "gateway", "mailer")),
					f("consumes", "The consumer groups it runs; only a process with a group is a target of the rewind fault\n"+
						"(every instance stopped, the group rewound to offset 0, restarted: redelivery).",
						arr(obj(
							f("consumer", "The applied query's consumer column for what this consumer applies.", str("orders")),
							f("group", "The Kafka consumer group id (what a rewind rewinds).", str("orders")),
							f("topics", "Manifest topic names it reads.", strs("stock")),
							f("types", "Record types it applies; others it skips without an applied record (empty: all).",
								strs("StockReserved", "StockReserveFailed", "StockReleased"))))),
				),
				obj(
					f("name", "", str("stock")),
					f("role", "", str("consumer")),
					f("command", "", strs(bin, "stock")),
					f("env", "", obj(
						f("DATABASE_URL", "", str("{{db:stock}}")),
						f("KAFKA_BROKERS", "", str("{{kafka}}")),
						f("TOPIC_ORDERS", "", str("{{topic:orders}}")),
						f("TOPIC_STOCK", "", str("{{topic:stock}}")),
						f("LISTEN_ADDR", "", str("{{listen}}")),
						f("INITIAL_STOCK", "{{resource:NAME}}: the run's initial amounts of counted resource NAME, as JSON\n"+
							"{\"sku-1\": 10, …}; stock must start from exactly these.", str("{{resource:stock}}")))),
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
					f("replicas", "Competing instances relay-1, relay-2: together they must still publish one order's rows\n"+
						"in order (a scenario's relays range may change the count).", num(2)),
					f("command", "", strs(bin, "relay")),
					f("env", "", obj(
						f("RELAY_DATABASES", "The outboxes it publishes: both databases (a relay per service works as well).",
							str("orders={{db:orders}} stock={{db:stock}}")),
						f("KAFKA_BROKERS", "", str("{{kafka}}")),
						f("LISTEN_ADDR", "", str("{{listen}}")))),
					f("health", "", str("/healthz")),
					f("depends", "", strs("postgres", "kafka")),
					f("slots", "A CDC relay (logical replication, as Debezium does) lists its slots, [{\"db\": \"orders\"}]: the\n"+
						"harness samples them and aims CDC faults at their holder (application_name = instance). Polling: none.", arr()),
				),
			)),
		f("api", "Which process the workload's clients call (through the link client→PROCESS).",
			obj(f("process", "A process of role api; it serves workload.start, read and list.", str("orders")))),
		f("observe", "SQL the observer runs once after quiescence, directly (not through a link); columns are read by\n"+
			"name, others ignored (docs/target-contract.md, \"Observer SQL\").",
			obj(
				f("outbox", "One query per database with an outbox: id, event_id, aggregate_id, seq, type, topic and\n"+
					"published (true only once the broker acked the record and the relay recorded it).",
					arr(obj(
						f("db", "One of databases.", str("orders")),
						f("sql", "seq may be left out with \"seq\": \"outbox\".", str(outbox)),
						f("complete", "Your promise that no row it returns is deleted during a run (retention longer than a\n"+
							"run): only then is a missing row evidence of a lost or phantom event.", yes()),
						f("published", "column: the query's published column. log: none; a row is published once its event_id\n"+
							"is in the Kafka log (a CDC relay, which never writes to its outbox).", str("column"))),
						obj(f("db", "", str("stock")), f("sql", "", str(outbox)), f("complete", "", yes())))),
				f("applied", "One query per consumer database (its inbox): consumer, event_id, aggregate_id, source, type,\n"+
					"seq (optional) and position, which orders one consumer's applications.",
					arr(obj(
						f("db", "The consumer's database.", str("orders")),
						f("sql", "The inbox your consumer writes in the same transaction that applies the record.", str(inbox))),
						obj(f("db", "", str("stock")), f("sql", "", str(inbox))))),
				f("resources", "One query per counted resource, by name: columns key, available, reserved. (Older\n"+
					"manifests wrote \"stock\" here with column sku; a resource may carry its own \"observe\".)",
					obj(f("stock", "Conservation checks available + reserved = initial for every key, and reserved = held.",
						obj(f("db", "The database that keeps the counts.", str("stock")),
							f("sql", "One row per key; name your columns key, available and reserved with AS.",
								str("SELECT sku AS key, available, reserved FROM stock ORDER BY sku")))))),
			)),
		f("failpoints", "Optional: a command printing your failpoint catalogue as JSON [{\"name\", \"component\",\n"+
			"\"description\"}]: crash points the nemesis arms through SAGACHAOS_FAILPOINTS.",
			strs(bin, "--list-failpoints")),
		f("mutants", "Optional: planted bugs your service switches on through SAGACHAOS_MUTANT, to prove the harness\n"+
			"catches them: [{\"name\", \"description\", \"checkers\", \"scenarios\"}] (sagachaos selftest).",
			arr()),
		note("Your domain from here on: saga, world, workload, resources and seq. To share them, move them\n"+
			"into a file and name it with \"domain\": \"path/from/this/file.json\" (\"domain\": \"order\" is the\n"+
			"built-in order domain); the sections written here win over the file's."),
		f("saga", "The saga as data: the saga checkers read this, never your code. Outbox-only (no saga)? Delete\n"+
			"it and every held_by (the money resource with it); the saga checkers then say not applicable.",
			obj(
				f("name", "Its name, in the history and the verdicts.", str("order")),
				f("orchestrator", "The service that drives the saga (keeps its state, sends the commands). Choreographed,\n"+
					"each service reacting to the others' events? Leave orchestrator out.", str("orders")),
				f("status_service", "The service whose API reports a saga's status (workload read and list); a\n"+
					"choreographed saga names one too.", str("orders")),
				f("status_from", "api: statuses from workload.list (or read). events: your API reports none; a saga has\n"+
					"ended once its aggregate's outbox holds success_event or failure_event (needs observe.outbox).", str("api")),
				f("pending", "The status your API reports for a saga in flight.", str("PENDING")),
				f("success", "The terminal statuses (three different ones with pending): quiescence waits until every\n"+
					"saga has one. success: it went through.", str("APPROVED")),
				f("failure", "It failed and was compensated.", str("CANCELLED")),
				f("success_event", "Optional: the event the saga publishes when it succeeds; saga-terminates checks that a\n"+
					"saga that ended has its event in the log.", str("OrderApproved")),
				f("failure_event", "…and when it fails.", str("OrderCancelled")),
				f("step_timeout_ms", "Your promise to act on every pending saga within this many ms (move on, retry or\n"+
					"compensate). 0 promises nothing: a stuck saga then shows only at the quiescence deadline.", num(0)),
				f("steps", "In saga order: compensatable steps, then at most one pivot (the point of no return), then\n"+
					"retriable ones.",
					arr(
						obj(
							f("name", "Unique among the steps and their compensations.", str("create-order")),
							f("service", "The service that runs the step and publishes its event.", str("orders")),
							f("kind", "compensatable: undone by its compensation when the saga fails; pivot: never undone once\n"+
								"done; retriable: retried until it succeeds.", str("compensatable")),
							f("event", "The event type its service publishes when the step is done: the checkers find the step\n"+
								"in the log by it (a step without an effect is judged by its event alone).", str("OrderCreated")),
							f("compensation", "What undoes it: a name, the event it publishes and, like a step, an effect.",
								obj(f("name", "Unique like a step's.", str("cancel-order")),
									f("event", "The event its service publishes once it is undone: it must come after the step's.", str("OrderCancelled")))),
						),
						obj(
							f("name", "", str("reserve-stock")),
							f("service", "", str("stock")),
							f("kind", "", str("compensatable")),
							f("event", "", str("StockReserved")),
							f("compensation", "", obj(f("name", "", str("release-stock")), f("event", "", str("StockReleased")))),
						),
						obj(
							f("name", "", str("charge")),
							f("service", "", str("orders")),
							f("kind", "", str("pivot")),
							f("event", "", str("PaymentCharged")),
							f("effect", "The step's effect in the world: the calls of a provider's action the checkers count\n"+
								"(all-or-nothing, no-double-effect, compensation-order, pivot).",
								obj(
									f("provider", "A provider of world.", str("gateway")),
									f("action", "One of its actions.", str("charge")),
									f("match", "Only calls whose effect has these top-level string fields count: a declined charge is\n"+
										"none. (\"proc\" and \"f\", the history's names, are filled in from provider and action.)",
										raw(`{"status": "succeeded"}`)))),
							f("compensation", "A pivot's compensation names the undo that must never happen: the pivot checker flags it.",
								obj(
									f("name", "", str("refund")),
									f("event", "", str("PaymentRefunded")),
									f("effect", "The refund at the gateway, what would undo the charge (provider, action and match as\n"+
										"in a step's effect).", raw(`{"provider": "gateway", "action": "refund", "match": {"status": "succeeded"}}`)))),
						),
						obj(
							f("name", "", str("confirm")),
							f("service", "", str("orders")),
							f("kind", "", str("retriable")),
							f("event", "", str("OrderApproved")),
							f("effect", "The confirmation e-mail: exactly one, however often the step is retried.",
								raw(`{"provider": "mailer", "action": "email", "match": {"kind": "confirmation"}}`)),
						),
					)),
			)),
		f("world", "The third parties your services call, served by the harness on loopback ({{url:NAME}}) with a\n"+
			"real provider's idempotency: the same Idempotency-Key and body gets the stored answer, nothing twice.",
			arr(
				obj(
					f("name", "Its name in depends, {{url:NAME}} and the saga's effects (world/NAME in the history).", str("gateway")),
					f("kind", "payments: it keeps amounts (a charge moves one in, its refunds at most that back), so money\n"+
						"is conserved per saga. Leave kind out for plain actions.", str("payments")),
					f("actions", "Each is POST <path> with a JSON body; every call the provider acts on is an effect in the\n"+
						"history (its value: the request's scalar fields, id, status, idempotency_key).",
						arr(
							obj(
								f("name", "The effect's f in the history; the saga's effects name it.", str("charge")),
								f("path", "Its POST path under {{url:gateway}}.", str("/charges")),
								f("role", "In a payments provider: exactly one action with role charge, at most one with refund.", str("charge")),
								f("saga", "The request field holding the saga's id; a call without it is a 400 bad_request.", str("order_id")),
								f("amount", "The request field with the amount: a positive integer in minor units (default amount).", str("amount")),
								f("required", "Further request fields every call must carry (else a 400).", strs("card")),
								f("outcome", "The request field whose value picks the outcome: the workload's outcome tokens\n"+
									"(decline → 402 declined; ambiguous_500, ambiguous_hang → applied, then no good answer).", str("card")),
								f("ambiguous", "The nemesis may make its calls ambiguous (applied, answered 500 or never): your service\n"+
									"must retry with the same Idempotency-Key, or it charges twice.", yes()),
								f("id_prefix", "The prefix of the ids it issues (default: the action's first two letters and _).", str("ch_")),
								f("id_field", "The effect's field holding the issued id (default id; the answer always says id): named\n"+
									"like the refund's refers field, a charge and its refunds line up in the history.", str("charge_id")),
								f("decline_code", "The code of a declined answer, 402 {\"status\": \"declined\", \"code\": …} (default declined).", str("card_declined")),
							),
							obj(
								f("name", "", str("refund")),
								f("path", "", str("/refunds")),
								f("role", "", str("refund")),
								f("saga", "", str("order_id")),
								f("amount", "At most what is left of the charge; 0 refunds all that is left.", str("amount")),
								f("refers", "It names an earlier effect of this provider: an id that is none is a 404 (rejected),\n"+
									"and a call without saga is attributed to that effect's saga.",
									obj(f("field", "The request field holding the charge's id.", str("charge_id")),
										f("action", "The action that issued it.", str("charge")))),
								f("id_prefix", "", str("re_")),
								f("id_field", "", str("refund_id")),
							),
						)),
				),
				obj(
					f("name", "", str("mailer")),
					f("actions", "", arr(obj(
						f("name", "", str("email")),
						f("path", "", str("/emails")),
						f("saga", "", str("order_id")),
						f("required", "", strs("kind")),
						f("answer", "The status code of a success (a 2xx; default 200).", num(202)),
						f("id_prefix", "", str("em_")),
						f("id_field", "", str("email_id"))))),
				),
			)),
		f("workload", "How the clients start sagas and read them back, over the API of api.process.",
			obj(
				f("op", "The history's name of a start (default start-saga).", str("place-order")),
				f("start", "One saga is one request. An answer that is neither a 2xx with an id nor a 4xx with a JSON\n"+
					"code is an unknown outcome, retried with the same key: your API must be idempotent.",
					obj(
						f("method", "POST or PUT (default POST).", str("POST")),
						f("path", "Its path on api.process.", str("/orders")),
						f("key", "The Idempotency-Key, {n} the saga's number: the same key and body again must create\n"+
							"nothing and answer the first answer; the same key with another body is a 409.", str("order-{n}")),
						f("key_header", "The header it is sent in (default Idempotency-Key).", str("Idempotency-Key")),
						f("body", "The JSON body, drawn per saga in the order written: plain JSON is sent as it is, an object\n"+
							"of exactly one of the shapes below is a generator node.",
							obj(
								f("customer", "choices: one of the values, by weight (weights optional).",
									raw(`{"choices": ["c-1", "c-2", "c-3"], "weights": [3, 2, 1]}`)),
								f("reference", "seq: the saga's number in a string.", raw(`{"seq": "ref-{n}"}`)),
								f("items", "array: len lines; each line's resource node takes a distinct key of stock, int an integer\n"+
									"in [min, max]. A range with a param can be replaced by a scenario's params.",
									raw(`{"array": {"len": {"min": 1, "max": 2, "param": "lines"}, "item": {"sku": {"resource": "stock"}, "qty": {"int": {"min": 1, "max": 3, "param": "qty"}}}}}`)),
								f("card", "outcome: a token (decline, ambiguous_500, ambiguous_hang; allow limits them) at the scenario's\n"+
									"rates, else default. Orders passes it on as the charge's card, the gateway's outcome field.",
									raw(`{"outcome": {"default": "tok_visa", "format": "tok_{outcome}_{n}"}}`)),
								f("total", "sum: Σ over items (drawn above) of qty × its sku's price (key i costs values[i mod len]):\n"+
									"what the charge must move, and what the money resource holds.",
									raw(`{"sum": {"over": "items", "field": "qty", "price": {"resource": "stock", "key": "sku", "values": [100, 250, 400]}}}`)),
								f("address", "int with format: the integer written into a string.",
									raw(`{"int": {"min": 1, "max": 99}, "format": "{int} Main Street"}`)),
								f("channel", "Plain JSON, sent as it is.", str("web")),
								f("meta", "literal: its value as written, for an object that would read as a node ({\"seq\": …} alone).",
									raw(`{"literal": {"seq": "checkout-v2"}}`)),
							)),
						f("id", "JSON pointer to the saga's id in the 2xx answer (a string or a number; default /id).", str("/id")),
						f("status", "JSON pointer to its status there (default /status).", str("/status")),
					)),
				f("read", "GET path with {id} replaced answers one saga (pointers id, status, key, trail as in list):\n"+
					"without list the observer reads each saga the clients were given and marks its list incomplete.",
					obj(f("path", "It must hold {id}.", str("/orders/{id}")))),
				f("list", "GET path answers every saga your service knows: quiescence polls it and the observer reads the\n"+
					"final statuses from it.",
					obj(
						f("path", "It answers a JSON array, or an object holding one at items.", str("/orders")),
						f("items", "JSON pointer to the array in the answer (empty, or left out: the answer is the array).", str("/orders")),
						f("id", "In each element, JSON pointers to the saga's id (default /id),", str("/id")),
						f("status", "its status (default /status),", str("/status")),
						f("key", "the Idempotency-Key it was started with (default /idempotency_key; may be absent)", str("/idempotency_key")),
						f("trail", "and its step trail, a list of strings (default /trail; may be absent).", str("/trail")),
					)),
			)),
		f("resources", "What your service must conserve (the conservation checker); without any, it says not applicable.",
			arr(
				obj(
					f("name", "Its name in {{resource:NAME}}, observe.resources and the body's resource nodes.", str("stock")),
					f("keys", "A counted resource: keys with an amount each, drawn per run. Or declare them instead of keys\n"+
						"and initial: \"amounts\": {\"sku-1\": 10, \"sku-2\": 3}.",
						obj(
							f("count", "How many keys: a range (min, max, and a param a scenario may replace; resource_keys\n"+
								"replaces it for every counted resource).", raw(`{"min": 2, "max": 5, "param": "skus"}`)),
							f("format", "Their names, {n} from 1.", str("sku-{n}")))),
					f("initial", "Each key's initial amount, drawn from this range (a scenario's resource_initial replaces it).",
						raw(`{"min": 5, "max": 40, "param": "stock"}`)),
					f("held_by", "What a saga that ended in success holds, read from its start body: reserved must equal the\n"+
						"sum of it.",
						obj(
							f("items", "JSON pointer to the body's array of lines.", str("/items")),
							f("key", "The line's field naming the key.", str("sku")),
							f("quantity", "The line's field with the units held. (Without items, key and quantity are JSON pointers\n"+
								"into the body.)", str("qty")))),
				),
				obj(
					f("name", "", str("money")),
					f("kind", "payments: money at a payments provider; per saga, charges − refunds must be held_by's quantity\n"+
						"if it succeeded, else 0. Leave kind out for a counted resource.", str("payments")),
					f("provider", "The payments provider. (\"proc\", \"charge\" and \"refund\" are filled in from it in the\n"+
						"history; leave them out.)", str("gateway")),
					f("held_by", "", obj(f("quantity", "", str("/total")))),
				),
			)),
		f("seq", "header: every record carries a seq header (its position among one aggregate's records of one\n"+
			"source, from 1). outbox: no header; one aggregate's outbox rows, by id, are its order.", str("header")),
	)
}

// Skeleton is the commented manifest `sagachaos init` writes for a new
// target: today's fields with placeholder values that load as they are
// (ParseManifest accepts whole-line // comments), each with what it means.
func Skeleton(name string) []byte {
	var b strings.Builder
	b.WriteString("// sagachaos manifest: how the harness builds, starts, drives and observes your service.\n")
	b.WriteString("// It describes a small order service (orders and stock, a payment gateway, a mailer) as an\n")
	b.WriteString("// example: replace it with yours, then: sagachaos run --target ./sagachaos.json --scenario calm --seed 1\n")
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
		last := -1 // the last field with a key: no comma after it
		for i, fl := range n.fields {
			if fl.key != "" {
				last = i
			}
		}
		for i, fl := range n.fields {
			if fl.key == "" {
				b.WriteString("\n")
			}
			if fl.comment != "" {
				for _, line := range strings.Split(fl.comment, "\n") {
					fmt.Fprintf(b, "%s// %s\n", pad, line)
				}
			}
			if fl.key == "" {
				b.WriteString("\n") // a note: a comment of its own, set apart
				continue
			}
			fmt.Fprintf(b, "%s%q: ", pad, fl.key)
			write(b, fl.val, depth+1)
			if i < last {
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
