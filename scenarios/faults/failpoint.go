package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pgregory.net/rapid"
)

// Failpoint arms a declared failpoint of one instance before it starts
// (SAGACHAOS_FAILPOINTS): the action runs on the point's hit-th hit in a
// process's life. Arming is not firing: the fault is journaled armed at
// start, and fired — with the hit and the workload position — only when
// the component logs that the action ran. A crash does not disarm the
// other faults armed on the instance: its next incarnation is armed with
// every one that has not fired yet.
type Failpoint struct {
	Component string `json:"component" doc:"the instance armed (\"relay-2\")"`
	Action    string `json:"action" doc:"crash, error or sleep(DURATION)"`
	Hit       int    `json:"hit" doc:"fires on this hit of the point in a process's life"`
}

func init() { Register(func() Kind { return &Failpoint{Action: "crash", Hit: 1} }) }

// Name implements Kind.
func (*Failpoint) Name() string { return "failpoint" }

// Doc implements Kind.
func (*Failpoint) Doc() string {
	return "arms a declared failpoint of an instance (target: the failpoint); fires on its Nth hit"
}

// Validate implements Kind.
func (p *Failpoint) Validate() error {
	if p.Component == "" {
		return Bad(p, "component", "empty: name the instance to arm")
	}
	switch {
	case p.Action == "crash" || p.Action == "error":
	case strings.HasPrefix(p.Action, "sleep(") && strings.HasSuffix(p.Action, ")"):
		if _, err := time.ParseDuration(p.Action[len("sleep(") : len(p.Action)-1]); err != nil {
			return Bad(p, "action", "%q: %v", p.Action, err)
		}
	default:
		return Bad(p, "action", "%q is not crash, error or sleep(DURATION)", p.Action)
	}
	if p.Hit < 1 {
		return Bad(p, "hit", "%d is below 1", p.Hit)
	}
	return nil
}

// Draw implements Kind: a declared failpoint, one instance of its process,
// a crash on hit 1–8.
func (p *Failpoint) Draw(t *rapid.T, a Aim) (string, bool) {
	if len(a.Failpoints) == 0 {
		return "", false
	}
	fp := a.Failpoints[rapid.IntRange(0, len(a.Failpoints)-1).Draw(t, "failpoint")]
	if len(fp.Instances) == 0 {
		return "", false
	}
	p.Component = Pick(t, fp.Instances, "instance")
	p.Action = "crash"
	p.Hit = rapid.IntRange(1, 8).Draw(t, "hit")
	return fp.Name, true
}

// Arm implements StartArmed.
func (p *Failpoint) Arm(f Fault) (instance, failpoint, action string, hit int) {
	return p.Component, f.Target, p.Action, p.Hit
}

// Apply implements Kind: the target stage armed it before the instance
// started; this journals the arming.
func (p *Failpoint) Apply(_ context.Context, s System, f Fault) (Effect, error) {
	inst, ok := s.Failpoints().Armed(f.ID)
	if !ok {
		return Effect{}, errors.New("not armed: the target stage did not arm it")
	}
	if inst != p.Component {
		return Effect{}, fmt.Errorf("armed on %s, not on %s", inst, p.Component)
	}
	return Effect{Detail: map[string]string{"effect": "armed", "armed": inst, "action": p.Action, "hit": strconv.Itoa(p.Hit)}}, nil
}
