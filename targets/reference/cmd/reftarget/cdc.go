package main

import (
	"context"
	"time"

	"github.com/sagachaos/sagachaos/targets/reference/internal/cdcrelay"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
)

// runCDCRelay runs the CDC flavour of the relay (package cdcrelay): the
// same RELAY_DATABASES and KAFKA_BROKERS as the polling relay, plus
// RELAY_SLOT_WAIT (how often a relay waiting for a slot checks it, default
// 200ms) and RELAY_BATCH (transactions produced together, default 50).
func runCDCRelay(ctx context.Context, c *common) error {
	dbs, err := relayDatabases()
	if err != nil {
		return err
	}
	wait, err := svc.EnvDuration("RELAY_SLOT_WAIT", 200*time.Millisecond)
	if err != nil {
		return err
	}
	batch, err := svc.EnvInt("RELAY_BATCH", 50)
	if err != nil {
		return err
	}
	ln, err := svc.Listen(c.listen)
	if err != nil {
		return err
	}
	cl, err := relayProducer(c.brokers)
	if err != nil {
		ln.Close()
		return err
	}
	defer cl.Close()
	cfg := cdcrelay.Config{Client: cl, Instance: svc.Instance(), Wait: wait, Batch: batch, Log: c.log}
	if cfg.Instance == "" {
		cfg.Instance = "cdc-relay"
	}
	for name, dsn := range dbs {
		cfg.Sources = append(cfg.Sources, cdcrelay.Source{Name: name, DSN: dsn})
	}
	r := cdcrelay.New(cfg)
	srvErr := make(chan error, 1)
	go func() { srvErr <- svc.Serve(ctx, ln, nil, r.Ready) }()
	c.log.Info("started", "component", "cdc-relay", "databases", len(cfg.Sources))
	relErr := make(chan error, 1)
	go func() { relErr <- r.Run(ctx) }()
	select {
	case err := <-srvErr:
		return err
	case err := <-relErr:
		return err
	case <-ctx.Done():
		return nil
	}
}
