package world

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sagachaos/sagachaos/models"
)

// World is the set of fake third parties one run talks to.
type World struct {
	Gateway *Gateway
	Carrier *Carrier
	Mailer  *Mailer
}

// Option configures Start.
type Option func(*options)

type options struct {
	logger      *slog.Logger
	beforeApply func(f string)
}

// WithLogger sets where the services log (default: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// Start starts the gateway, the carrier and the mailer, each on its own
// 127.0.0.1 port, recording through rec. ctx bounds the start only; the
// world runs until Close.
func Start(ctx context.Context, rec *models.Recorder, opts ...Option) (*World, error) {
	if rec == nil {
		return nil, errors.New("world: start: nil recorder (the world exists to record)")
	}
	o := &options{logger: slog.Default()}
	for _, opt := range opts {
		opt(o)
	}
	w := &World{
		Gateway: newGateway(rec, o),
		Carrier: newCarrier(rec, o),
		Mailer:  newMailer(rec, o),
	}
	var started []*service
	for _, s := range []*service{w.Gateway.svc, w.Carrier.svc, w.Mailer.svc} {
		if err := s.start(ctx); err != nil {
			for _, st := range started {
				st.close()
			}
			return nil, fmt.Errorf("world: start: %w", err)
		}
		started = append(started, s)
	}
	return w, nil
}

// Close stops the three services. Held (hanging) requests are dropped, so
// their callers see the connection close. Close is idempotent.
func (w *World) Close() error {
	return errors.Join(w.Gateway.svc.close(), w.Carrier.svc.close(), w.Mailer.svc.close())
}

// URLs returns the base URLs (http://host:port) by service name: "gateway",
// "carrier", "mailer" (the names manifests use in depends).
func (w *World) URLs() map[string]string {
	return map[string]string{
		"gateway": "http://" + w.Gateway.Addr(),
		"carrier": "http://" + w.Carrier.Addr(),
		"mailer":  "http://" + w.Mailer.Addr(),
	}
}
