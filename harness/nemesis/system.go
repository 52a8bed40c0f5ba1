package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/scenarios/faults"
)

// system is the faults.System the nemesis hands to every kind's Apply.
type system struct{ n *Nemesis }

var _ faults.System = system{}

func (s system) Link(name string) (faults.Link, error) {
	l := s.n.Env.Link(name)
	if l == nil {
		return nil, fmt.Errorf("no link %q", name)
	}
	return &link{l: l, h: s.n.holds.of("link " + name)}, nil
}

func (s system) Components() faults.Components { return s.n.Target }

func (s system) Postgres() (faults.Postgres, error) {
	if s.n.Env == nil {
		return nil, errors.New("no environment")
	}
	return &postgres{e: s.n.Env, h: s.n.holds.of("postgres")}, nil
}

func (s system) Broker() (faults.Broker, error) {
	c := s.n.Env.KafkaCluster()
	if c == nil {
		return nil, errors.New("broker faults need the embedded kfake cluster")
	}
	return broker{c}, nil
}

func (s system) World() (faults.World, error) {
	if s.n.World == nil {
		return nil, errors.New("no world")
	}
	return s.n.World, nil
}

func (s system) Consumers() (faults.Consumers, error) {
	if s.n.Rewinder == nil {
		return nil, errors.New("no rewinder: the Kafka provider cannot rewind groups")
	}
	return consumers{s.n}, nil
}

func (s system) Failpoints() faults.Failpoints { return s.n.Target }

// holds reference-counts the faults that hold a shared resource down: the
// first acquire applies, the last release undoes. Each resource has its
// own lock, held while applying or undoing, so a second fault on it waits
// for the first one's call to finish and then sees what really happened.
type holds struct {
	mu sync.Mutex
	m  map[string]*hold
}

func (h *holds) of(key string) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*hold{}
	}
	if h.m[key] == nil {
		h.m[key] = &hold{}
	}
	return h.m[key]
}

type hold struct {
	mu sync.Mutex
	by []string
}

// acquire adds id; the first holder runs apply. It returns the holders
// there were before id.
func (h *hold) acquire(id string, apply func() error) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	others := append([]string(nil), h.by...)
	if len(others) == 0 {
		if err := apply(); err != nil {
			return nil, err
		}
	}
	h.by = append(h.by, id)
	return others, nil
}

// release removes id; the last holder runs undo. It returns the holders
// left.
func (h *hold) release(id string, undo func() error) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.by[:0]
	found := false
	for _, x := range h.by {
		if x == id {
			found = true
			continue
		}
		kept = append(kept, x)
	}
	h.by = kept
	left := append([]string(nil), kept...)
	if found && len(left) == 0 {
		return nil, undo()
	}
	return left, nil
}

type link struct {
	l *env.Link
	h *hold
}

func (k *link) Down(id string) (faults.Outcome, error) {
	others, err := k.h.acquire(id, k.l.Down)
	if err != nil {
		return "", err
	}
	if len(others) > 0 {
		return "already down: held by " + strings.Join(others, ","), nil
	}
	return "down", nil
}

func (k *link) Up(id string) (faults.Outcome, error) {
	left, err := k.h.release(id, k.l.Up)
	if err != nil {
		return "", err
	}
	if len(left) > 0 {
		return "still down: held by " + strings.Join(left, ","), nil
	}
	return "up", nil
}

func (k *link) AddToxic(name, typ string, stream faults.Stream, attrs map[string]any) error {
	return k.l.AddToxic(name, typ, string(stream), attrs)
}

func (k *link) RemoveToxic(name string) error { return k.l.RemoveToxic(name) }

type postgres struct {
	e *env.Env
	h *hold
}

func (p *postgres) Crash(ctx context.Context, id string) (faults.Outcome, error) {
	others, err := p.h.acquire(id, func() error { return p.e.CrashPostgres(ctx) })
	if err != nil {
		return "", err
	}
	if len(others) > 0 {
		return "already down: held by " + strings.Join(others, ","), nil
	}
	return "crashed", nil
}

func (p *postgres) Restart(ctx context.Context, id string) (faults.Outcome, error) {
	left, err := p.h.release(id, func() error { return p.e.RestartPostgres(ctx) })
	if err != nil {
		return "", err
	}
	if len(left) > 0 {
		return "still down: held by " + strings.Join(left, ","), nil
	}
	return "restarted", nil
}

type broker struct{ c *kfake.Cluster }

// AfterAct injects REQUEST_TIMED_OUT, the error kfake answers after doing
// the work: the records are written (the offset is stored) and the client
// is told it failed, exactly the ambiguity a real broker produces.
func (b broker) AfterAct(kind string, count int) (faults.BrokerFault, error) {
	var key kmsg.Key
	switch kind {
	case "produce":
		key = kmsg.Produce
	case "commit":
		key = kmsg.OffsetCommit
	default:
		return nil, fmt.Errorf("unknown broker request %q (want produce or commit)", kind)
	}
	return b.c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerr.RequestTimedOut, Count: count}), nil
}

type consumers struct{ n *Nemesis }

func (c consumers) Groups(instance string) ([]string, []string, error) {
	return c.n.Target.Groups(instance)
}

func (c consumers) Rewind(ctx context.Context, groups []string) (string, error) {
	return c.n.Rewinder.Rewind(ctx, groups)
}
