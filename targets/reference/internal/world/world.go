// Package world calls the harness's third-party services (gateway,
// carrier, mailer) the way a careful client calls a real provider: every
// call carries an idempotency key derived from the saga and the step, and
// an ambiguous outcome (timeout, connection error, 5xx, "in progress") is
// retried with the same key until the provider gives a definite answer.
package world

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/targets/reference/internal/failpoint"
	"github.com/sagachaos/sagachaos/targets/reference/internal/mutant"
	"github.com/sagachaos/sagachaos/targets/reference/internal/svc"
)

// Client calls one world service.
type Client struct {
	Base string
	HTTP *http.Client
	Log  *slog.Logger
	// Marker, when set, is the reachability marker reported each time a
	// call's outcome is ambiguous and it is asked again.
	Marker string
}

// New returns a client for base with a per-request timeout, so a hanging
// provider is given up on and asked again with the same key.
func New(base string, timeout time.Duration, log *slog.Logger) *Client {
	if mutant.Is(mutant.NoStepTimeout) {
		timeout = 0 // planted bug: see Call
	}
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: timeout}, Log: log}
}

// Answer is a definite reply: its status and decoded body.
type Answer struct {
	Status int
	Body   map[string]any
}

// Str returns a string field of the body.
func (a Answer) Str(k string) string { s, _ := a.Body[k].(string); return s }

// Call POSTs body to path with key until the answer is definite: 2xx, or
// one of the statuses in definite (e.g. 402 declined). key "" sends no
// Idempotency-Key (only planted bugs do that). It gives up only when ctx
// ends.
func (c *Client) Call(ctx context.Context, path, key string, body any, definite ...int) (Answer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Answer{}, fmt.Errorf("marshal %s body: %w", path, err)
	}
	if mutant.Is(mutant.NoStepTimeout) {
		// Planted bug: "never abandon a call to the provider": neither the
		// caller's deadline nor a per-request timeout ends the wait.
		ctx = context.WithoutCancel(ctx)
	}
	for n := 0; ; n++ {
		a, err := c.once(ctx, path, key, b)
		if err == nil {
			if a.Status/100 == 2 {
				return a, nil
			}
			for _, d := range definite {
				if a.Status == d {
					return a, nil
				}
			}
			err = fmt.Errorf("status %d %v", a.Status, a.Body)
		}
		if ctx.Err() != nil {
			return Answer{}, fmt.Errorf("%s %s (key %s): %w", c.Base, path, key, ctx.Err())
		}
		if c.Marker != "" {
			failpoint.Reached(c.Marker)
		}
		if n%10 == 0 {
			c.Log.Warn("world call ambiguous, retrying with the same key", "url", c.Base+path, "key", key, "attempt", n+1, "err", err)
		}
		svc.Backoff(ctx, n)
	}
}

func (c *Client) once(ctx context.Context, path, key string, body []byte) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Answer{}, fmt.Errorf("read answer: %w", err)
	}
	a := Answer{Status: resp.StatusCode, Body: map[string]any{}}
	_ = json.Unmarshal(raw, &a.Body)
	return a, nil
}
