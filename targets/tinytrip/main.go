// Command tinytrip is the harness's second target: a tiny choreographed
// trip saga, written against docs/target-contract.md only, whose domain is
// nothing like the order domain — other statuses (PENDING, BOOKED,
// ABORTED), another world (an airline that books and cancels, a bank that
// charges), another workload (POST /trips) and no seq header (per-aggregate
// order is the outbox's, as with an off-the-shelf outbox library). It
// exists to prove the harness is generic (issue 15); it is not a model
// service: no step timeouts, no failpoints, no planted bugs.
//
// The saga, choreographed (nobody orchestrates; each service reacts):
//
//	trips    POST /trips          → TripRequested            (status PENDING)
//	flights  TripRequested        → airline /book → FlightBooked | FlightFailed
//	payments FlightBooked         → bank /charges → PaymentCharged | PaymentDeclined
//	flights  PaymentDeclined      → airline /cancel → FlightCancelled
//	trips    PaymentCharged       → BOOKED (TripBooked); FlightFailed, FlightCancelled → ABORTED (TripAborted)
//
// Every service keeps its own database with an outbox and an inbox; one
// process per service (subcommands), and a relay that publishes every
// database's outbox. With OUTBOX_ONLY=1 trips only records TripRequested
// and nothing consumes it (the outbox-only manifest).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

var log = slog.New(slog.NewTextHandler(os.Stderr, nil))

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tinytrip trips|flights|payments|relay")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "trips":
		err = runTrips(ctx)
	case "flights":
		err = runFlights(ctx)
	case "payments":
		err = runPayments(ctx)
	case "relay":
		err = runRelay(ctx)
	default:
		err = fmt.Errorf("unknown service %q", os.Args[1])
	}
	if err != nil && ctx.Err() == nil {
		log.Error("exit", "err", err)
		os.Exit(2)
	}
}

func env(k string) string { return os.Getenv(k) }

const schema = `
CREATE TABLE IF NOT EXISTS outbox (id bigserial PRIMARY KEY, event_id text NOT NULL UNIQUE, aggregate_id text NOT NULL,
  type text NOT NULL, topic text NOT NULL, payload jsonb NOT NULL, published_at timestamptz);
CREATE TABLE IF NOT EXISTS inbox (event_id text PRIMARY KEY, consumer text NOT NULL, aggregate_id text NOT NULL,
  source text NOT NULL, type text NOT NULL, position bigserial);
CREATE TABLE IF NOT EXISTS trips (id text PRIMARY KEY, idempotency_key text NOT NULL UNIQUE, request_hash text NOT NULL,
  status text NOT NULL, trail text[] NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS bookings (trip_id text PRIMARY KEY, booking_id text NOT NULL);`

// open connects to DATABASE_URL and applies the schema, retrying while the
// database comes up.
func open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	var last error
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		pool, err := pgxpool.New(ctx, url)
		if err == nil {
			if _, err = pool.Exec(ctx, schema); err == nil {
				return pool, nil
			}
			pool.Close()
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("database: %w", last)
}

// message is one outbox row as published: the envelope headers of the
// contract, no seq (the manifest says seq: outbox).
type message struct {
	Type, Topic, Aggregate string
	Payload                map[string]any
}

// emit writes msg to the outbox in tx.
func emit(ctx context.Context, tx pgx.Tx, m message) error {
	b, _ := json.Marshal(m.Payload)
	_, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_id, type, topic, payload) VALUES ($1, $2, $3, $4, $5)`,
		fmt.Sprintf("%s-%d", m.Aggregate, time.Now().UnixNano()), m.Aggregate, m.Type, m.Topic, b)
	return err
}

// health serves GET /healthz (and the rest of mux) on LISTEN_ADDR.
func serve(ctx context.Context, mux *http.ServeMux) error {
	ln, err := net.Listen("tcp", env("LISTEN_ADDR"))
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func kafkaOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(env("KAFKA_BROKERS"), ",")...),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
}

// consume applies every record of topics once per event_id: the handler
// runs, then its writes and the inbox row commit in one transaction. A
// handler error leaves the record uncommitted; it is tried again.
func consume(ctx context.Context, pool *pgxpool.Pool, name string, topics []string, handle func(ctx context.Context, tx pgx.Tx, typ, agg string, payload map[string]any) error) error {
	cl, err := kgo.NewClient(append(kafkaOpts(),
		kgo.ConsumerGroup(name), kgo.ConsumeTopics(topics...), kgo.DisableAutoCommit(),
		kgo.InstanceID(env("SAGACHAOS_INSTANCE")), kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, r := range fs.Records() {
			for ctx.Err() == nil {
				if err := apply(ctx, pool, name, r, handle); err != nil {
					log.Warn("apply failed; retrying", "consumer", name, "err", err)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				break
			}
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			log.Warn("commit offsets", "err", err)
		}
	}
	return nil
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func apply(ctx context.Context, pool *pgxpool.Pool, name string, r *kgo.Record, handle func(context.Context, pgx.Tx, string, string, map[string]any) error) error {
	var payload map[string]any
	_ = json.Unmarshal(r.Value, &payload)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO inbox (event_id, consumer, aggregate_id, source, type) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
			header(r, "event_id"), name, header(r, "aggregate_id"), header(r, "source"), header(r, "type"))
		if err != nil || tag.RowsAffected() == 0 {
			return err // a redelivery: applied once already
		}
		return handle(ctx, tx, header(r, "type"), header(r, "aggregate_id"), payload)
	})
}

// call POSTs body to a world provider with an Idempotency-Key until the
// answer is definite (2xx or 402); an ambiguous one is asked again with the
// same key.
func call(ctx context.Context, url, key string, body map[string]any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Second}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusPaymentRequired {
				var out map[string]any
				_ = json.Unmarshal(raw, &out)
				return resp.StatusCode, out, nil
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, raw)
		}
		log.Warn("world call ambiguous; asking again with the same key", "url", url, "key", key, "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	return 0, nil, ctx.Err()
}

// ---- trips: the API and the status ----

type tripView struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	IdempotencyKey string   `json:"idempotency_key"`
	Trail          []string `json:"trail"`
}

func runTrips(ctx context.Context) error {
	pool, err := open(ctx, env("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	topic := env("TOPIC_TRIPS")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /trips", func(w http.ResponseWriter, r *http.Request) { createTrip(r.Context(), pool, topic, w, r) })
	mux.HandleFunc("GET /trips/{id}", func(w http.ResponseWriter, r *http.Request) {
		var v tripView
		err := pool.QueryRow(r.Context(), `SELECT id, status, idempotency_key, trail FROM trips WHERE id = $1`, r.PathValue("id")).Scan(&v.ID, &v.Status, &v.IdempotencyKey, &v.Trail)
		if err != nil {
			writeJSON(w, 404, map[string]string{"code": "not_found", "error": err.Error()})
			return
		}
		writeJSON(w, 200, v)
	})
	mux.HandleFunc("GET /trips", func(w http.ResponseWriter, r *http.Request) {
		rows, err := pool.Query(r.Context(), `SELECT id, status, idempotency_key, trail FROM trips ORDER BY id`)
		if err != nil {
			writeJSON(w, 503, map[string]string{"code": "unavailable", "error": err.Error()})
			return
		}
		out := []tripView{}
		for rows.Next() {
			var v tripView
			if err := rows.Scan(&v.ID, &v.Status, &v.IdempotencyKey, &v.Trail); err != nil {
				writeJSON(w, 503, map[string]string{"code": "unavailable", "error": err.Error()})
				return
			}
			out = append(out, v)
		}
		writeJSON(w, 200, map[string]any{"trips": out})
	})
	if env("OUTBOX_ONLY") == "" {
		go func() {
			err := consume(ctx, pool, "trips", []string{env("TOPIC_FLIGHTS"), env("TOPIC_PAYMENTS")}, func(ctx context.Context, tx pgx.Tx, typ, trip string, _ map[string]any) error {
				status, event := "", ""
				switch typ {
				case "PaymentCharged":
					status, event = "BOOKED", "TripBooked"
				case "FlightFailed", "FlightCancelled":
					status, event = "ABORTED", "TripAborted"
				}
				tag, err := tx.Exec(ctx, `UPDATE trips SET trail = trail || $2::text, status = CASE WHEN $3 <> '' AND status = 'PENDING' THEN $3 ELSE status END WHERE id = $1`, trip, typ, status)
				if err != nil || status == "" || tag.RowsAffected() == 0 {
					return err
				}
				return emit(ctx, tx, message{Type: event, Topic: topic, Aggregate: trip, Payload: map[string]any{"trip_id": trip}})
			})
			if err != nil && ctx.Err() == nil {
				log.Error("trips consumer", "err", err)
				os.Exit(1)
			}
		}()
	}
	return serve(ctx, mux)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func createTrip(ctx context.Context, pool *pgxpool.Pool, topic string, w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req map[string]any
	if key == "" || json.Unmarshal(raw, &req) != nil {
		writeJSON(w, 400, map[string]string{"code": "bad_request", "error": "want a JSON body and an Idempotency-Key"})
		return
	}
	canon, _ := json.Marshal(req)
	sum := sha256.Sum256(canon)
	hash := hex.EncodeToString(sum[:])
	id := "t-" + hash[:12] + "-" + key
	var status, gotHash, gotID string
	created := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		created = false
		err := tx.QueryRow(ctx, `SELECT id, status, request_hash FROM trips WHERE idempotency_key = $1`, key).Scan(&gotID, &status, &gotHash)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		gotID, status, gotHash, created = id, "PENDING", hash, true
		if _, err := tx.Exec(ctx, `INSERT INTO trips (id, idempotency_key, request_hash, status) VALUES ($1, $2, $3, 'PENDING')`, id, key, hash); err != nil {
			return err
		}
		req["trip_id"] = id
		return emit(ctx, tx, message{Type: "TripRequested", Topic: topic, Aggregate: id, Payload: req})
	})
	switch {
	case err != nil:
		writeJSON(w, 503, map[string]string{"code": "unavailable", "error": err.Error()})
	case gotHash != hash:
		writeJSON(w, 409, map[string]string{"code": "idempotency_key_reused", "error": "this Idempotency-Key was used with another request"})
	default:
		if !created {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeJSON(w, 202, tripView{ID: gotID, Status: status, IdempotencyKey: key})
	}
}

// ---- flights: books and cancels at the airline ----

func runFlights(ctx context.Context) error {
	pool, err := open(ctx, env("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	airline, topic := strings.TrimRight(env("AIRLINE_URL"), "/"), env("TOPIC_FLIGHTS")
	go func() { _ = serve(ctx, http.NewServeMux()) }()
	return consume(ctx, pool, "flights", []string{env("TOPIC_TRIPS"), env("TOPIC_PAYMENTS")}, func(ctx context.Context, tx pgx.Tx, typ, trip string, p map[string]any) error {
		switch typ {
		case "TripRequested":
			st, ans, err := call(ctx, airline+"/book", "book:"+trip, map[string]any{"trip_id": trip, "flight": p["flight"], "outcome": p["flight_outcome"]})
			if err != nil {
				return err
			}
			if st == http.StatusPaymentRequired {
				return emit(ctx, tx, message{Type: "FlightFailed", Topic: topic, Aggregate: trip, Payload: map[string]any{"trip_id": trip}})
			}
			booking, _ := ans["id"].(string)
			if _, err := tx.Exec(ctx, `INSERT INTO bookings (trip_id, booking_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, trip, booking); err != nil {
				return err
			}
			return emit(ctx, tx, message{Type: "FlightBooked", Topic: topic, Aggregate: trip,
				Payload: map[string]any{"trip_id": trip, "booking_id": booking, "card": p["card"], "total": p["total"]}})
		case "PaymentDeclined":
			var booking string
			if err := tx.QueryRow(ctx, `SELECT booking_id FROM bookings WHERE trip_id = $1`, trip).Scan(&booking); err != nil {
				return err
			}
			if _, _, err := call(ctx, airline+"/cancel", "cancel:"+trip, map[string]any{"trip_id": trip, "booking_id": booking}); err != nil {
				return err
			}
			return emit(ctx, tx, message{Type: "FlightCancelled", Topic: topic, Aggregate: trip, Payload: map[string]any{"trip_id": trip}})
		}
		return nil
	})
}

// ---- payments: charges at the bank ----

func runPayments(ctx context.Context) error {
	pool, err := open(ctx, env("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	bank, topic := strings.TrimRight(env("BANK_URL"), "/"), env("TOPIC_PAYMENTS")
	go func() { _ = serve(ctx, http.NewServeMux()) }()
	return consume(ctx, pool, "payments", []string{env("TOPIC_FLIGHTS")}, func(ctx context.Context, tx pgx.Tx, typ, trip string, p map[string]any) error {
		if typ != "FlightBooked" {
			return nil
		}
		st, _, err := call(ctx, bank+"/charges", "charge:"+trip, map[string]any{"trip_id": trip, "amount": p["total"], "card": p["card"]})
		if err != nil {
			return err
		}
		ev := "PaymentCharged"
		if st == http.StatusPaymentRequired {
			ev = "PaymentDeclined"
		}
		return emit(ctx, tx, message{Type: ev, Topic: topic, Aggregate: trip, Payload: map[string]any{"trip_id": trip}})
	})
}

// ---- relay: publishes every database's outbox ----

func runRelay(ctx context.Context) error {
	var pools []*pgxpool.Pool
	var names []string
	for _, kv := range strings.Fields(env("RELAY_DATABASES")) {
		name, url, _ := strings.Cut(kv, "=")
		p, err := open(ctx, url)
		if err != nil {
			return err
		}
		defer p.Close()
		pools, names = append(pools, p), append(names, name)
	}
	cl, err := kgo.NewClient(append(kafkaOpts(), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	go func() { _ = serve(ctx, http.NewServeMux()) }()
	for ctx.Err() == nil {
		idle := true
		for i, p := range pools {
			n, err := publish(ctx, p, names[i], cl)
			if err != nil && ctx.Err() == nil {
				log.Warn("relay", "db", names[i], "err", err)
			}
			idle = idle && n == 0
		}
		if idle {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// publish sends one batch of a database's unpublished rows in id order.
// One relay at a time per database (a transaction-scoped advisory lock), so
// an aggregate's rows reach the log in outbox order.
func publish(ctx context.Context, pool *pgxpool.Pool, source string, cl *kgo.Client) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var mine bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(42)`).Scan(&mine); err != nil || !mine {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, event_id, aggregate_id, type, topic, payload FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT 50`)
		if err != nil {
			return err
		}
		var recs []*kgo.Record
		var ids []int64
		for rows.Next() {
			var id int64
			var ev, agg, typ, topic string
			var payload []byte
			if err := rows.Scan(&id, &ev, &agg, &typ, &topic, &payload); err != nil {
				return err
			}
			ids = append(ids, id)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(agg), Value: payload, Headers: []kgo.RecordHeader{
				{Key: "event_id", Value: []byte(ev)}, {Key: "aggregate_id", Value: []byte(agg)},
				{Key: "type", Value: []byte(typ)}, {Key: "source", Value: []byte(source)}}})
		}
		if err := rows.Err(); err != nil || len(recs) == 0 {
			return err
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		n = len(ids)
		_, err = tx.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE id = ANY($1)`, ids)
		return err
	})
	return n, err
}
