package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sagachaos/sagachaos/models"
)

// Email is one e-mail the mailer accepted (a snapshot).
type Email struct {
	ID      string
	OrderID string
	Kind    string
	To      string
}

// Mailer is the fake mailer: POST /emails.
type Mailer struct {
	svc    *service
	emails []Email
}

func newMailer(rec *models.Recorder, o *options) *Mailer {
	m := &Mailer{svc: newService("mailer", models.ProcMailer, rec, o)}
	m.svc.handle("POST /emails", models.FEmail, m.parse)
	return m
}

// Addr is the mailer's host:port.
func (m *Mailer) Addr() string { return m.svc.addr() }

// InjectAmbiguous makes the next n new e-mail requests ambiguous (see
// Gateway.InjectAmbiguous).
func (m *Mailer) InjectAmbiguous(mode string, n int) error {
	return m.svc.inject(models.FEmail, mode, n)
}

// Emails returns a snapshot of every e-mail, in acceptance order.
func (m *Mailer) Emails() []Email {
	m.svc.mu.Lock()
	defer m.svc.mu.Unlock()
	return append([]Email(nil), m.emails...)
}

type emailReq struct {
	m       *Mailer
	OrderID string `json:"order_id"`
	Kind    string `json:"kind"`
	To      string `json:"to"`
}

func (m *Mailer) parse(body []byte) (request, error) {
	r := &emailReq{m: m}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("email body: %w", err)
	}
	if r.OrderID == "" {
		return nil, errors.New("email: order_id is required")
	}
	if r.Kind == "" {
		return nil, errors.New("email: kind is required (e.g. \"confirmation\")")
	}
	return r, nil
}

func (r *emailReq) orderID() string   { return r.OrderID }
func (r *emailReq) ambiguity() string { return "" }

func (r *emailReq) apply(amb, key string) outcome {
	m := r.m
	e := Email{ID: fmt.Sprintf("em_%06d", len(m.emails)+1), OrderID: r.OrderID, Kind: r.Kind, To: r.To}
	m.emails = append(m.emails, e)
	return outcome{
		order:  r.OrderID,
		answer: answer{http.StatusAccepted, mustJSON(map[string]string{"id": e.ID})},
		effect: emailEffect{models.EmailEffect{EmailID: e.ID, Kind: e.Kind, To: e.To, IdempotencyKey: key, Ambiguous: amb}},
	}
}

type emailEffect struct{ models.EmailEffect }

func (e emailEffect) replay() replayable {
	e.Replay, e.Ambiguous = true, ""
	return e
}
