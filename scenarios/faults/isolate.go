package faults

import (
	"context"
	"errors"
	"strings"

	"pgregory.net/rapid"
)

// Isolate partitions one instance from everything it talks to: every link
// of the instance (to its database, the broker, the world providers) is
// cut at once for the window, open connections included, while the process
// keeps running — its requests in flight are lost after they left it, its
// retries and timeouts run against a dead network (a Jepsen partition of
// one node). Overlapping cuts of a link compose with the other link kinds.
type Isolate struct {
	Links []string `json:"links" doc:"the links cut (drawn: every link of the instance)"`
}

func init() { Register(func() Kind { return &Isolate{} }) }

// Name implements Kind.
func (*Isolate) Name() string { return "isolate" }

// Doc implements Kind.
func (*Isolate) Doc() string {
	return "cuts every link of an instance at once for the window (a partition of one process)"
}

// Validate implements Kind.
func (p *Isolate) Validate() error {
	for i, l := range p.Links {
		if !strings.Contains(l, "→") {
			return Bad(p, "links", "entry %d %q is not a link (component→dependency)", i, l)
		}
	}
	return nil
}

// Draw implements Kind: an instance that has links; all of them.
func (p *Isolate) Draw(t *rapid.T, a Aim) (string, bool) {
	var with []string
	links := map[string][]string{}
	for _, l := range a.Links {
		from, _, _ := strings.Cut(l, "→")
		links[from] = append(links[from], l)
	}
	for _, c := range a.Components {
		if len(links[c]) > 0 {
			with = append(with, c)
		}
	}
	if len(with) == 0 {
		return "", false
	}
	c := Pick(t, with, "component")
	p.Links = links[c]
	return c, true
}

// Apply implements Kind: every link down; the undo brings back each one it
// cut (a link another fault still holds stays down).
func (p *Isolate) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	if len(p.Links) == 0 {
		return Effect{}, errors.New("no link to cut")
	}
	var cut []Link
	var effects []string
	undo := func() (map[string]string, error) {
		var errs []error
		var out []string
		for i, l := range cut {
			o, err := l.Up(f.ID)
			errs = append(errs, err)
			out = append(out, p.Links[i]+" "+o)
		}
		return map[string]string{"effect": strings.Join(out, "; ")}, errors.Join(errs...)
	}
	for _, name := range p.Links {
		l, err := s.Link(name)
		if err == nil {
			var o Outcome
			if o, err = l.Down(f.ID); err == nil {
				cut = append(cut, l)
				effects = append(effects, name+" "+o)
				continue
			}
		}
		_, uerr := undo()
		return Effect{}, errors.Join(err, uerr)
	}
	return Effect{
		Detail: map[string]string{"effect": strings.Join(effects, "; ")},
		Undo:   func(context.Context) (map[string]string, error) { return undo() },
	}, nil
}
