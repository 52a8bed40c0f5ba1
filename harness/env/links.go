package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Link is one in-process toxiproxy proxy between a component and a
// dependency. Down/Up cut and restore it on the same port, so clients
// configured with Listen keep working after a heal.
type Link struct {
	name  string
	proxy *toxiproxy.Proxy

	mu     sync.Mutex
	toxics map[string]bool
}

// Name is "component→dependency" (or whatever NewLink was given).
func (l *Link) Name() string { return l.name }

// Listen is the host:port clients connect to.
func (l *Link) Listen() string {
	l.proxy.Lock()
	defer l.proxy.Unlock()
	return l.proxy.Listen
}

// Upstream is the host:port the link forwards to.
func (l *Link) Upstream() string { return l.proxy.Upstream }

// Down cuts the link: closes its listener and every open connection.
func (l *Link) Down() error {
	l.proxy.Stop()
	return nil
}

// Up restores the link on the same port; a no-op if it is up.
func (l *Link) Up() error {
	if err := l.proxy.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("link %s: restore on %s: %w", l.name, l.proxy.Listen, err)
	}
	return nil
}

// Enabled reports whether the link is up.
func (l *Link) Enabled() bool {
	l.proxy.Lock()
	defer l.proxy.Unlock()
	return l.proxy.Enabled
}

// AddToxic adds a toxiproxy toxic (typ "latency", "timeout", "reset_peer",
// "limit_data", "bandwidth", "slicer", "slow_close") on stream "upstream" or
// "downstream" (default). Toxicity is always 1: the harness decides from its
// seed when a toxic applies, toxiproxy's own coin is not seedable.
func (l *Link) AddToxic(name, typ, stream string, attrs map[string]any) error {
	if stream == "" {
		stream = "downstream"
	}
	if attrs == nil {
		attrs = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{
		"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs,
	})
	if err != nil {
		return fmt.Errorf("link %s: toxic %s: encode: %w", l.name, name, err)
	}
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return fmt.Errorf("link %s: add toxic %s (%s): %w", l.name, name, typ, err)
	}
	l.mu.Lock()
	l.toxics[name] = true
	l.mu.Unlock()
	return nil
}

// RemoveToxic removes one toxic by name.
func (l *Link) RemoveToxic(name string) error {
	if err := l.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("link %s: remove toxic %s: %w", l.name, name, err)
	}
	l.mu.Lock()
	delete(l.toxics, name)
	l.mu.Unlock()
	return nil
}

// Heal brings the link up and removes every toxic.
func (l *Link) Heal() error {
	l.proxy.Toxics.ResetToxics(context.Background())
	l.mu.Lock()
	clear(l.toxics)
	l.mu.Unlock()
	return l.Up()
}

// links owns the in-process toxiproxy server and its proxies.
type links struct {
	server *toxiproxy.ApiServer

	mu    sync.Mutex
	byKey map[string]*Link
}

func newLinks() *links {
	// toxiproxy logs every connection at info through zerolog's global
	// logger; a chaos run opens thousands.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	logger := zerolog.Nop()
	return &links{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger),
		byKey:  map[string]*Link{},
	}
}

// get returns link name, creating it toward upstream if it does not exist.
// An existing link with another upstream is an error: names are identities.
func (ls *links) get(name, upstream string) (*Link, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.byKey[name]; ok {
		if upstream != "" && l.Upstream() != upstream {
			return nil, fmt.Errorf("link %s: already exists toward %s, not %s", name, l.Upstream(), upstream)
		}
		return l, nil
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("link %s: upstream %q is not host:port: %w", name, upstream, err)
	}
	p := toxiproxy.NewProxy(ls.server, name, "127.0.0.1:0", upstream)
	if err := ls.server.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("link %s: start proxy toward %s: %w", name, upstream, err)
	}
	l := &Link{name: name, proxy: p, toxics: map[string]bool{}}
	ls.byKey[name] = l
	return l, nil
}

func (ls *links) lookup(name string) *Link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byKey[name]
}

func (ls *links) all() []*Link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*Link, 0, len(ls.byKey))
	for _, l := range ls.byKey {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (ls *links) close() {
	_ = ls.server.Collection.Clear()
	ls.mu.Lock()
	clear(ls.byKey)
	ls.mu.Unlock()
}
