// Command reftarget runs one component of the reference order-saga target:
//
//	reftarget orders|inventory|payment|delivery|relay|cdc-relay
//	reftarget --list-failpoints [cdc]
//
// Configuration comes only from env (docs/target-contract.md), so the
// harness can route every connection through its own proxied link. A bad
// setting exits 2 with one line on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sagachaos/sagachaos/targets"
	"github.com/sagachaos/sagachaos/targets/reference/internal/consumer"
	"github.com/sagachaos/sagachaos/targets/reference/internal/delivery"
	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/inventory"
	"github.com/sagachaos/sagachaos/targets/reference/internal/msg"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/orders"
	"github.com/sagachaos/sagachaos/targets/reference/internal/outbox"
	"github.com/sagachaos/sagachaos/targets/reference/internal/payment"
	"github.com/sagachaos/sagachaos/targets/reference/internal/relay"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
	"github.com/sagachaos/sagachaos/targets/reference/internal/world"
)

const usage = "usage: reftarget orders|inventory|payment|delivery|relay|cdc-relay | --list-failpoints [cdc]"

func main() {
	if len(os.Args) == 3 && os.Args[1] == "--list-failpoints" && os.Args[2] == "cdc" {
		listFailpoints(failpoint.ForFlavour("cdc"))
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if os.Args[1] == "--list-failpoints" {
		listFailpoints(failpoint.Catalogue)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1])
	if err != nil {
		var ce *svc.ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintf(os.Stderr, "reftarget %s: %v\n", os.Args[1], err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "reftarget %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

type common struct {
	log         *slog.Logger
	listen      string
	brokers     string
	stepTimeout time.Duration
	session     time.Duration
}

func setup(component string) (*common, error) {
	inst := os.Getenv("SAGACHAOS_INSTANCE")
	if inst == "" {
		inst = component
	}
	if err := failpoint.Setup(os.Getenv("SAGACHAOS_FAILPOINTS"), os.Getenv("SAGACHAOS_FAILPOINT_LOG"), inst); err != nil {
		return nil, &svc.ConfigError{Msg: "SAGACHAOS_FAILPOINTS: " + err.Error()}
	}
	if err := mutant.Set(os.Getenv("SAGACHAOS_MUTANT")); err != nil {
		return nil, &svc.ConfigError{Msg: "SAGACHAOS_MUTANT: " + err.Error()}
	}
	c := &common{log: svc.Logger(component)}
	var err error
	if c.listen, err = svc.Env("LISTEN_ADDR"); err != nil {
		return nil, err
	}
	if c.brokers, err = svc.Env("KAFKA_BROKERS"); err != nil {
		return nil, err
	}
	if c.stepTimeout, err = svc.EnvDuration("STEP_TIMEOUT", 5*time.Second); err != nil {
		return nil, err
	}
	if c.session, err = svc.EnvDuration("KAFKA_SESSION_TIMEOUT", time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

func run(ctx context.Context, component string) error {
	switch component {
	case "orders", "inventory", "payment", "delivery", "relay", "cdc-relay":
	default:
		return &svc.ConfigError{Msg: fmt.Sprintf("unknown component %q (%s)", component, usage)}
	}
	c, err := setup(component)
	if err != nil {
		return err
	}
	if component == "relay" {
		return runRelay(ctx, c)
	}
	if component == "cdc-relay" {
		return runCDCRelay(ctx, c)
	}
	dsn, err := svc.Env("DATABASE_URL")
	if err != nil {
		return err
	}
	// Validate the rest of the config before touching the network.
	var (
		stock     map[string]int64
		worldURL  string
		worldName string
	)
	switch component {
	case "inventory":
		s := os.Getenv("INITIAL_STOCK")
		if s != "" {
			if err := json.Unmarshal([]byte(s), &stock); err != nil {
				return &svc.ConfigError{Msg: fmt.Sprintf("INITIAL_STOCK: want JSON {\"sku\": n}: %v", err)}
			}
		}
	case "payment":
		worldName = "PAYMENT_GATEWAY_URL"
	case "delivery":
		worldName = "CARRIER_URL"
	case "orders":
		worldName = "MAILER_URL"
	}
	if worldName != "" {
		if worldURL, err = svc.Env(worldName); err != nil {
			return err
		}
	}
	worldTimeout, err := svc.EnvDuration("WORLD_TIMEOUT", time.Second)
	if err != nil {
		return err
	}
	ln, err := svc.Listen(c.listen)
	if err != nil {
		return err
	}
	pool, err := svc.Pool(ctx, dsn, 16)
	if err != nil {
		ln.Close()
		return err
	}
	defer pool.Close()

	var ready atomic.Bool
	mux := http.NewServeMux()
	srvErr := make(chan error, 1)
	go func() { srvErr <- svc.Serve(ctx, ln, mux, ready.Load) }()

	cc := consumer.Config{Brokers: c.brokers, Group: component, Log: c.log, SessionTimeout: c.session}
	var schema string
	var start func()
	switch component {
	case "inventory":
		s := &inventory.Service{DB: pool, Log: c.log}
		schema, cc.Topics, cc.Types, cc.Handler = inventory.Schema, []string{msg.TopicOrders}, inventory.Types, s.Handle
		cc.SkipFailed = mutant.Is(mutant.SkipFailedMessage)
		s.Routes(mux)
		start = func() {
			for n := 0; ctx.Err() == nil; n++ {
				if err := s.Seed(ctx, stock); err == nil {
					return
				} else {
					c.log.Warn("seed stock", "err", err)
				}
				svc.Backoff(ctx, n)
			}
		}
	case "payment":
		s := &payment.Service{DB: pool, Log: c.log, Gateway: marked(world.New(worldURL, worldTimeout, c.log), "payment.gateway-unknown")}
		schema, cc.Topics, cc.Types, cc.Handler = payment.Schema, []string{msg.TopicOrders}, payment.Types, s.Handle
	case "delivery":
		s := &delivery.Service{DB: pool, Log: c.log, Carrier: marked(world.New(worldURL, worldTimeout, c.log), "delivery.carrier-unknown")}
		schema, cc.Topics, cc.Types, cc.Handler = delivery.Schema, []string{msg.TopicOrders}, delivery.Types, s.Handle
	case "orders":
		s := &orders.Service{DB: pool, Log: c.log, StepTimeout: c.stepTimeout, Mailer: marked(world.New(worldURL, worldTimeout, c.log), "orders.email-retry")}
		schema = orders.Schema
		cc.Topics, cc.Types, cc.Handler = []string{msg.TopicInventory, msg.TopicPayment, msg.TopicDelivery}, orders.Types, s.Handle
		s.Routes(mux)
		start = func() { go s.RunTimers(ctx, 100*time.Millisecond) }
	}
	if err := svc.Migrate(ctx, pool, schema); err != nil {
		return err
	}
	if mutant.Is(mutant.DualWrite) || mutant.Is(mutant.PublishBeforeCommit) {
		direct, err := kgo.NewClient(append(svc.KafkaOpts(c.brokers), kgo.ProducerLinger(0))...)
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer direct.Close()
		outbox.Direct, outbox.DirectPool = direct, pool
	}
	if start != nil {
		start()
	}
	ready.Store(true)
	c.log.Info("started", "component", component)
	consErr := make(chan error, 1)
	go func() { consErr <- consumer.Run(ctx, cc) }()
	select {
	case err := <-srvErr:
		return err
	case err := <-consErr:
		return err
	case <-ctx.Done():
		return nil
	}
}

// relayDatabases reads RELAY_DATABASES ("orders=URL inventory=URL"), the outboxes a relay
// of either flavour publishes; a malformed value is a configuration error
// (exit 2).
func relayDatabases() (map[string]string, error) {
	s, err := svc.Env("RELAY_DATABASES")
	if err != nil {
		return nil, err
	}
	dbs, err := relay.ParseDatabases(s)
	if err != nil {
		return nil, &svc.ConfigError{Msg: err.Error()}
	}
	return dbs, nil
}

func runRelay(ctx context.Context, c *common) error {
	dbs, err := relayDatabases()
	if err != nil {
		return err
	}
	retention, err := svc.EnvDuration("OUTBOX_RETENTION", time.Hour)
	if err != nil {
		return err
	}
	cleanup, err := svc.EnvDuration("OUTBOX_CLEANUP_INTERVAL", time.Minute)
	if err != nil {
		return err
	}
	batch, err := svc.EnvInt("RELAY_BATCH", 200)
	if err != nil {
		return err
	}
	interval, err := svc.EnvDuration("RELAY_INTERVAL", 20*time.Millisecond)
	if err != nil {
		return err
	}
	ln, err := svc.Listen(c.listen)
	if err != nil {
		return err
	}
	cfg := relay.Config{Batch: batch, Interval: interval, Retention: retention, CleanupEvery: cleanup, Log: c.log}
	for name, dsn := range dbs {
		p, err := svc.Pool(ctx, dsn, 4)
		if err != nil {
			return fmt.Errorf("database %s: %w", name, err)
		}
		defer p.Close()
		cfg.Sources = append(cfg.Sources, relay.Source{Name: name, Pool: p})
	}
	cl, err := relayProducer(c.brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg.Client = cl
	var ready atomic.Bool
	ready.Store(true)
	srvErr := make(chan error, 1)
	go func() { srvErr <- svc.Serve(ctx, ln, nil, ready.Load) }()
	c.log.Info("started", "component", "relay", "databases", len(cfg.Sources))
	relErr := make(chan error, 1)
	go func() { relErr <- relay.Run(ctx, cfg) }()
	select {
	case err := <-srvErr:
		return err
	case err := <-relErr:
		return err
	case <-ctx.Done():
		return nil
	}
}

// marked sets the marker a world client reports on an ambiguous answer.
func marked(c *world.Client, marker string) *world.Client {
	c.Marker = marker
	return c
}

// listFailpoints prints a flavour's catalogue as the contract's
// --list-failpoints JSON. One function for every flavour, so a field the
// harness relies on (Kind: a marker cannot be armed) is never dropped from
// one of them.
func listFailpoints(points []failpoint.Point) {
	out := make([]targets.Failpoint, 0, len(points))
	for _, p := range points {
		out = append(out, targets.Failpoint{Name: p.Name, Component: p.Component, Description: p.Description, Kind: p.Kind})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

// relayProducer is the Kafka client both relay flavours publish with: keyed
// by aggregate onto one partition, no lingering, acknowledged by every
// in-sync replica before a row counts as published.
func relayProducer(brokers string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(svc.KafkaOpts(brokers),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}
