package reference_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
)

// Crash each component at each of its failpoints, restart it, and check
// that every saga still ends correctly with no lost and no duplicate world
// effect.
func TestCrashAtEveryFailpoint(t *testing.T) {
	type tc struct {
		point    string
		instance string
		hit      int
		step     time.Duration // short step timeouts make the timeout paths run
		cards    []string      // extra cards mixed into the workload
	}
	cases := []tc{
		{point: "relay.after-select", instance: "relay-1", hit: 3},
		{point: "relay.after-publish", instance: "relay-1", hit: 3},
		{point: "relay.after-mark", instance: "relay-2", hit: 3},
		{point: "relay.before-cleanup", instance: "relay-1", hit: 6},
		{point: "orders.after-create", instance: "orders", hit: 4},
		{point: "orders.after-state-save", instance: "orders", hit: 5},
		{point: "orders.after-timeout-save", instance: "orders", hit: 1, step: 400 * time.Millisecond, cards: []string{"tok_ambiguous_hang_1"}},
		{point: "orders.after-email", instance: "orders", hit: 2},
		{point: "inventory.after-apply-before-commit", instance: "inventory", hit: 3},
		{point: "inventory.after-commit", instance: "inventory", hit: 3},
		{point: "payment.after-charge", instance: "payment", hit: 2, cards: []string{"tok_ambiguous_500_1"}},
		{point: "payment.after-commit", instance: "payment", hit: 2},
		{point: "delivery.after-ship", instance: "delivery", hit: 2},
		{point: "delivery.after-commit", instance: "delivery", hit: 2},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.point] = true
	}
	for _, p := range failpoint.Catalogue {
		if p.Kind != failpoint.KindMarker && !covered[p.Name] {
			t.Errorf("failpoint %s has no crash case", p.Name)
		}
	}
	for _, c := range cases {
		t.Run(c.point, func(t *testing.T) {
			n := 40
			if testing.Short() {
				n = 16
			}
			reqs, stock := workload("fp", n)
			for i, card := range c.cards {
				reqs[(i*5+1)%n].Card = card
			}
			s := startSystem(t, sysOpts{stock: stock, stepTimeout: c.step,
				failpoints: map[string]string{c.instance: c.point + "=crash@" + itoa(c.hit)}})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			restarts := s.restartOnCrash(ctx, c.instance)
			placed := s.placeAll(ctx, reqs, 4)
			s.settle(ctx, len(placed))
			// Points on a timer (cleanup) may fire after the orders settled.
			for i := 0; i < 100 && !fired(t, s.fpLog, c.point); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			final := s.settle(ctx, len(placed))
			if !fired(t, s.fpLog, c.point) {
				t.Fatalf("failpoint %s never fired (logs in %s)\n%s", c.point, s.logDir, s.tails())
			}
			for i := 0; i < 100 && restarts() < 1; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if restarts() < 1 {
				t.Errorf("%s fired but %s was not restarted", c.point, c.instance)
			}
			s.verify(ctx, placed, final)
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// fired reports whether the failpoint log has a firing line for point.
func fired(t *testing.T, path, point string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Failpoint string `json:"failpoint"`
			Action    string `json:"action"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("failpoint log line %q: %v", sc.Text(), err)
			continue
		}
		if l.Failpoint == point && strings.TrimSpace(l.Action) != "" {
			return true
		}
	}
	return false
}
