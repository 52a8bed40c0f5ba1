package world

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// World is the set of fake third parties one run talks to: one Provider per
// declaration, each on its own 127.0.0.1 port.
type World struct {
	providers []*Provider
	byName    map[string]*Provider
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

// Start starts one provider per declaration, recording through rec. ctx
// bounds the start only; the world runs until Close. A declaration of an
// unknown kind is an error.
func Start(ctx context.Context, rec *models.Recorder, decls []models.Provider, opts ...Option) (*World, error) {
	if rec == nil {
		return nil, errors.New("world: start: nil recorder (the world exists to record)")
	}
	o := &options{logger: slog.Default()}
	for _, opt := range opts {
		opt(o)
	}
	w := &World{byName: map[string]*Provider{}}
	for _, d := range decls {
		p, err := newProvider(d, rec, o)
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("world: %w", err)
		}
		if err := p.svc.start(ctx); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("world: start: %w", err)
		}
		w.providers = append(w.providers, p)
		w.byName[d.Name] = p
	}
	return w, nil
}

// Close stops every provider and waits for the requests they are serving.
func (w *World) Close() error {
	var errs []error
	for _, p := range w.providers {
		errs = append(errs, p.svc.close())
	}
	return errors.Join(errs...)
}

// Provider returns the provider named name, or nil.
func (w *World) Provider(name string) *Provider { return w.byName[name] }

// Names lists the providers in declaration order.
func (w *World) Names() []string {
	out := make([]string, len(w.providers))
	for i, p := range w.providers {
		out[i] = p.decl.Name
	}
	return out
}

// URLs returns the base URLs (http://host:port) by provider name (the
// names manifests use in depends and {{url:NAME}}).
func (w *World) URLs() map[string]string {
	out := map[string]string{}
	for _, p := range w.providers {
		out[p.decl.Name] = "http://" + p.Addr()
	}
	return out
}

// AmbiguousActions lists "provider/action" for every action that declares
// the nemesis may make it ambiguous, sorted.
func (w *World) AmbiguousActions() []string {
	var out []string
	for _, p := range w.providers {
		for _, a := range p.decl.Actions {
			if a.Ambiguous {
				out = append(out, p.decl.Name+"/"+a.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// InjectAmbiguous makes the next n new calls of target ("provider/action")
// ambiguous in mode (Provider.InjectAmbiguous).
func (w *World) InjectAmbiguous(target, mode string, n int) error {
	name, action, _ := strings.Cut(target, "/")
	p := w.byName[name]
	if p == nil {
		return fmt.Errorf("world: no provider %q (target %q; want provider/action)", name, target)
	}
	return p.InjectAmbiguous(action, mode, n)
}
