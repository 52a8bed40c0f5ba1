package world

import (
	"fmt"
	"net/http"

	"github.com/sagachaos/sagachaos/models"
)

// payments is the built-in kind "payments": the action with role charge
// moves a positive amount in (declined by the outcome field), the one with
// role refund moves money back from a charge it names (its refers field,
// charge_id in the order domain): at most what is left of the charge; an
// amount of 0 refunds the rest, as Stripe does. Effects carry the amount.
type payments struct{}

func init() { registerKind(models.ProviderPayments, payments{}) }

func amountField(a models.ProviderAction) string {
	if a.Amount == "" {
		return "amount"
	}
	return a.Amount
}

func (payments) validate(c *call) error {
	f := amountField(c.a)
	switch c.a.Role {
	case models.RoleCharge:
		if n, ok := c.num(f); !ok || n <= 0 {
			return fmt.Errorf("%s: %s must be a positive integer (minor units)", c.a.Name, f)
		}
	case models.RoleRefund:
		if _, present := c.body[f]; present {
			if n, ok := c.num(f); !ok || n < 0 {
				return fmt.Errorf("%s: %s must be an integer ≥ 0 (0: the rest of the charge)", c.a.Name, f)
			}
		}
		if c.a.Refers == nil {
			return fmt.Errorf("%s: a refund action must declare refers (the field naming its charge)", c.a.Name)
		}
	}
	return nil
}

func (payments) apply(c *call, amb, key string) outcome {
	switch c.a.Role {
	case models.RoleCharge:
		return charge(c, amb, key)
	case models.RoleRefund:
		return refund(c, amb, key)
	}
	return applyPlain(c, amb, key)
}

func charge(c *call, amb, key string) outcome {
	p := c.p
	amount, _ := c.num(amountField(c.a))
	id := p.nextID(c.a)
	e := &Effect{Action: c.a.Name, ID: id, Saga: c.saga, Status: models.EffectSucceeded, Amount: amount, Request: c.body}
	ans := c.success(id)
	if c.declined() {
		e.Status, ans = models.EffectDeclined, c.decline(id)
	}
	p.record(e)
	return outcome{order: c.saga, answer: ans, effect: c.effect(id, e.Status, amb, key, map[string]any{"amount": amount})}
}

func refund(c *call, amb, key string) outcome {
	p := c.p
	field := amountField(c.a)
	asked, _ := c.num(field)
	ref := c.str(c.a.Refers.Field)
	saga := c.saga
	ch := p.byID[ref]
	reject := func(status int, code, msg string, amount int64) outcome {
		p.record(&Effect{Action: c.a.Name, Saga: saga, Status: models.EffectRejected, Amount: amount, Request: c.body})
		return outcome{order: saga, answer: rejected(status, code, msg),
			effect: c.effect("", models.EffectRejected, amb, key, map[string]any{"amount": amount})}
	}
	if ch == nil || ch.Action != c.a.Refers.Action {
		return reject(http.StatusNotFound, "charge_not_found", "no charge "+ref, asked)
	}
	if saga == "" {
		saga = ch.Saga
	}
	left := int64(0)
	if ch.Status == models.EffectSucceeded {
		left = ch.Amount - ch.Refunded
	}
	amount := asked
	if amount == 0 {
		amount = left
	}
	if amount <= 0 || amount > left {
		return reject(http.StatusBadRequest, "refund_exceeds_charge",
			fmt.Sprintf("refund of %d exceeds the %d left on %s (status %s)", amount, left, ch.ID, ch.Status), amount)
	}
	ch.Refunded += amount
	id := p.nextID(c.a)
	p.record(&Effect{Action: c.a.Name, ID: id, Saga: saga, Status: models.EffectSucceeded, Amount: amount, Request: c.body})
	return outcome{order: saga, answer: c.success(id), effect: c.effect(id, models.EffectSucceeded, amb, key, map[string]any{"amount": amount})}
}
