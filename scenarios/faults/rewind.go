package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"pgregory.net/rapid"
)

// Rewind stops every instance of a consumer's process, rewinds the consumer
// groups the process declares (manifest consumes) to the start of the log,
// and starts the instances again: everything is redelivered. Only processes
// that declare groups are rewound; the instances are started again even if
// the rewind failed.
type Rewind struct{}

func init() { Register(func() Kind { return &Rewind{} }) }

// Name implements Kind.
func (*Rewind) Name() string { return "rewind" }

// Doc implements Kind.
func (*Rewind) Doc() string {
	return "stops a consumer, rewinds its declared groups to offset 0, starts it again"
}

// Validate implements Kind.
func (*Rewind) Validate() error { return nil }

// Draw implements Kind: an instance of a process that declares consumes.
func (*Rewind) Draw(t *rapid.T, a Aim) (string, bool) {
	if len(a.Consumers) == 0 {
		return "", false
	}
	return Pick(t, a.Consumers, "consumer"), true
}

// Apply implements Kind: stop the instances; the undo rewinds and starts
// them again, at once.
func (*Rewind) Apply(ctx context.Context, s System, f Fault) (Effect, error) {
	cs, err := s.Consumers()
	if err != nil {
		return Effect{}, err
	}
	groups, insts, err := cs.Groups(f.Target)
	if err != nil {
		return Effect{}, err
	}
	if len(groups) == 0 {
		return Effect{}, fmt.Errorf("%s declares no consumer group (manifest consumes): nothing to rewind", f.Target)
	}
	c := s.Components()
	start := func(ctx context.Context, insts []string) error {
		var errs []error
		for _, in := range insts {
			if _, err := c.Start(ctx, in, f.ID); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	var stopped, effects []string
	for _, in := range insts {
		out, err := c.Stop(ctx, in, f.ID)
		if err != nil {
			return Effect{}, errors.Join(err, start(context.WithoutCancel(ctx), stopped))
		}
		stopped = append(stopped, in)
		effects = append(effects, in+" "+out)
	}
	return Effect{
		Detail:    map[string]string{"effect": strings.Join(effects, "; "), "action": "stopped " + strings.Join(stopped, ","), "groups": strings.Join(groups, ",")},
		Immediate: true,
		Undo: func(ctx context.Context) (map[string]string, error) {
			what, rerr := cs.Rewind(ctx, groups)
			return map[string]string{"rewound": what}, errors.Join(rerr, start(ctx, stopped))
		},
	}, nil
}
