package targets

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// This file is the domain half of the manifest: the saga spec, the world
// providers, the workload and the resources (docs/target-contract.md), how a
// manifest gets them (its own sections, a domain file, or — for a manifest
// with none of them — the order domain), and their validation.

// Where per-aggregate order comes from (Manifest.Seq).
const (
	SeqHeader = "header"
	SeqOutbox = "outbox"
)

// OrderDomainName is the built-in domain a manifest names with
// "domain": "order", and the one a manifest with no domain section gets.
const OrderDomainName = "order"

//go:embed domains/order.json
var orderDomainJSON []byte

// DomainFile is a file of domain sections (targets/domains/order.json).
type DomainFile struct {
	Schema      string            `json:"$schema,omitempty"`
	Description string            `json:"description,omitempty"`
	Saga        *models.SagaSpec  `json:"saga,omitempty"`
	World       []models.Provider `json:"world,omitempty"`
	Workload    *models.Workload  `json:"workload,omitempty"`
	Resources   []models.Resource `json:"resources,omitempty"`
	Seq         string            `json:"seq,omitempty"`
}

// OrderDomain returns the order domain's declaration (a fresh copy).
func OrderDomain() DomainFile {
	d, err := parseDomain(orderDomainJSON)
	if err != nil {
		panic("targets: the embedded order domain does not parse: " + err.Error())
	}
	return d
}

func parseDomain(b []byte) (DomainFile, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var d DomainFile
	if err := dec.Decode(&d); err != nil {
		return d, decodeError(err)
	}
	return d, nil
}

// declaresNoDomain reports whether the manifest declares no domain section
// at all (the older format): it then gets the order domain.
func (m *Manifest) declaresNoDomain() bool {
	return m.Domain == "" && m.Saga == nil && m.World == nil && m.Workload == nil && m.Resources == nil
}

// resolveDomain fills the domain sections the manifest does not declare
// from its domain file (or the order domain), and maps the older fields
// (observe.stock, the {{stock}} template) onto the resource "stock".
func (m *Manifest) resolveDomain(dir string) error {
	var d DomainFile
	switch {
	case m.declaresNoDomain() || m.Domain == OrderDomainName:
		d = OrderDomain()
	case m.Domain != "":
		p := m.Domain
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("field domain: %w", err)
		}
		if d, err = parseDomain(b); err != nil {
			return fmt.Errorf("domain file %s: %w", m.Domain, err)
		}
	}
	if m.Saga == nil {
		m.Saga = d.Saga
	}
	if m.World == nil {
		m.World = d.World
	}
	if m.Workload == nil {
		m.Workload = d.Workload
	}
	if m.Resources == nil {
		m.Resources = d.Resources
	}
	if m.Seq == "" {
		m.Seq = d.Seq
	}
	if m.Workload != nil {
		// Compact the body template, so a manifest written back out and
		// read again is the same manifest.
		w := *m.Workload
		var b bytes.Buffer
		if json.Compact(&b, w.Start.Body) == nil {
			w.Start.Body = b.Bytes()
		}
		m.Workload = &w
	}
	if m.Saga != nil {
		s := *m.Saga
		s.Steps = append([]models.Step(nil), s.Steps...)
		s.Normalize()
		m.Saga = &s
	}
	// The older stock query reads columns sku, available, reserved.
	if q := m.Observe.Stock; q != nil {
		if m.Observe.Resources == nil {
			m.Observe.Resources = map[string]Query{}
		}
		if _, ok := m.Observe.Resources[models.LegacyStock]; !ok {
			sql := strings.TrimRight(strings.TrimSpace(q.SQL), ";")
			m.Observe.Resources[models.LegacyStock] = Query{DB: q.DB, SQL: "SELECT sku AS key, available, reserved FROM (" + sql + ") AS stock", Complete: q.Complete}
		}
	}
	for i := range m.Processes {
		p := &m.Processes[i]
		for k, v := range p.Env {
			p.Env[k] = strings.ReplaceAll(v, "{{stock}}", "{{resource:"+models.LegacyStock+"}}")
		}
		for j, a := range p.Command {
			p.Command[j] = strings.ReplaceAll(a, "{{stock}}", "{{resource:"+models.LegacyStock+"}}")
		}
	}
	return nil
}

// Provider returns the world provider named name.
func (m *Manifest) Provider(name string) (models.Provider, bool) {
	for _, p := range m.World {
		if p.Name == name {
			return p, true
		}
	}
	return models.Provider{}, false
}

// Dependencies lists what a process may name in depends: postgres, kafka
// and every world provider, in that order. This is the one list of
// providers: templates ({{url:NAME}}), env up, this validator and the link
// builder read it.
func (m *Manifest) Dependencies() []string {
	out := []string{"postgres", "kafka"}
	for _, p := range m.World {
		out = append(out, p.Name)
	}
	return out
}

func (m *Manifest) knownDep(d string) bool {
	for _, x := range m.Dependencies() {
		if x == d {
			return true
		}
	}
	return false
}

// SeqFromOutbox reports whether per-aggregate order comes from the outbox.
func (m *Manifest) SeqFromOutbox() bool { return m.Seq == SeqOutbox }

// Declare fills what the manifest declares about its domain into d, the
// target op: the saga (or OutboxOnly), the resources (payments ones with
// their provider's process and actions), the seq source and the start
// op's name.
func (m *Manifest) Declare(d *models.TargetDecl) {
	if m.Workload != nil {
		// Compact the body template, so a manifest written back out and
		// read again is the same manifest.
		w := *m.Workload
		var b bytes.Buffer
		if json.Compact(&b, w.Start.Body) == nil {
			w.Start.Body = b.Bytes()
		}
		m.Workload = &w
	}
	if m.Saga != nil {
		s := *m.Saga
		d.Saga = &s
	} else {
		d.OutboxOnly = true
	}
	d.SeqFromOutbox = m.SeqFromOutbox()
	if m.Workload != nil {
		d.StartOp = m.Workload.OpName()
	}
	d.Resources = nil
	for _, r := range m.Resources {
		r.Observe = nil
		if r.Kind == models.ProviderPayments {
			if p, ok := m.Provider(r.Provider); ok {
				r.Proc = p.Proc()
				if a, ok := p.ByRole(models.RoleCharge); ok {
					r.Charge = a.Name
				}
				if a, ok := p.ByRole(models.RoleRefund); ok {
					r.Refund = a.Name
				}
			}
		}
		d.Resources = append(d.Resources, r)
	}
}

// ResourceQuery returns the SQL that reads the counted resource name.
func (m *Manifest) ResourceQuery(name string) (Query, bool) {
	for _, r := range m.Resources {
		if r.Name == name && r.Observe != nil {
			return Query{DB: r.Observe.DB, SQL: r.Observe.SQL}, true
		}
	}
	q, ok := m.Observe.Resources[name]
	return q, ok
}

func sortedKeys[V any](mp map[string]V) []string {
	out := make([]string, 0, len(mp))
	for k := range mp {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// decodeError names the field of a JSON decoding error.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return fmt.Errorf("field %s: unknown field", strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`))
	}
	return fmt.Errorf("decode: %w", err)
}

// validateDomain checks the domain sections: every name they use is
// declared, and each is usable.
func (m *Manifest) validateDomain() error {
	switch m.Seq {
	case "", SeqHeader, SeqOutbox:
	default:
		return fmt.Errorf("field seq: %q is not %q or %q", m.Seq, SeqHeader, SeqOutbox)
	}
	if err := m.validateWorld(); err != nil {
		return err
	}
	if m.Workload == nil {
		return errors.New("field workload: missing (how the clients start a saga or a unit of work)")
	}
	if err := m.validateWorkload(); err != nil {
		return err
	}
	if m.Saga != nil {
		if err := m.validateSaga(); err != nil {
			return err
		}
	}
	return m.validateResources()
}

func (m *Manifest) validateWorld() error {
	seen := map[string]bool{"postgres": true, "kafka": true}
	for i, p := range m.World {
		f := fmt.Sprintf("world[%d]", i)
		if p.Name == "" || strings.ContainsAny(p.Name, "/{}: ") {
			return fmt.Errorf("field %s.name: %q is empty or holds one of / { } : or a space", f, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("field %s.name: duplicate %q (postgres and kafka are taken)", f, p.Name)
		}
		seen[p.Name] = true
		switch p.Kind {
		case "", models.ProviderPayments:
		default:
			return fmt.Errorf("field %s.kind: unknown kind %q (known: payments)", f, p.Kind)
		}
		if len(p.Actions) == 0 {
			return fmt.Errorf("field %s.actions: empty", f)
		}
		names, paths, roles := map[string]bool{}, map[string]bool{}, map[string]int{}
		for j, a := range p.Actions {
			af := fmt.Sprintf("%s.actions[%d]", f, j)
			switch {
			case a.Name == "":
				return fmt.Errorf("field %s.name: empty", af)
			case names[a.Name]:
				return fmt.Errorf("field %s.name: duplicate %q", af, a.Name)
			case !strings.HasPrefix(a.Path, "/"):
				return fmt.Errorf("field %s.path: %q does not start with /", af, a.Path)
			case paths[a.Path]:
				return fmt.Errorf("field %s.path: duplicate %q", af, a.Path)
			case a.Saga == "" && a.Refers == nil:
				return fmt.Errorf("field %s.saga: empty (the request field naming the saga; required unless refers attributes the call)", af)
			case a.Answer != 0 && (a.Answer < 200 || a.Answer > 299):
				return fmt.Errorf("field %s.answer: %d is not a 2xx status", af, a.Answer)
			}
			names[a.Name], paths[a.Path] = true, true
			switch a.Role {
			case "":
			case models.RoleCharge, models.RoleRefund:
				if p.Kind != models.ProviderPayments {
					return fmt.Errorf("field %s.role: %q needs a provider of kind payments", af, a.Role)
				}
				roles[a.Role]++
			default:
				return fmt.Errorf("field %s.role: unknown role %q (known: charge, refund)", af, a.Role)
			}
		}
		for j, a := range p.Actions {
			if a.Refers == nil {
				continue
			}
			af := fmt.Sprintf("%s.actions[%d].refers", f, j)
			if a.Refers.Field == "" {
				return fmt.Errorf("field %s.field: empty", af)
			}
			if !names[a.Refers.Action] {
				return fmt.Errorf("field %s.action: %q is not an action of %s", af, a.Refers.Action, p.Name)
			}
		}
		if p.Kind == models.ProviderPayments && (roles[models.RoleCharge] != 1 || roles[models.RoleRefund] > 1) {
			return fmt.Errorf("field %s.actions: a payments provider needs one action with role charge and at most one with role refund", f)
		}
	}
	return nil
}

func validPointer(p string) bool { return p == "" || strings.HasPrefix(p, "/") }

func (m *Manifest) validateWorkload() error {
	w := m.Workload
	st := w.Start
	switch st.Method {
	case "", "POST", "PUT":
	default:
		return fmt.Errorf("field workload.start.method: %q is not POST or PUT", st.Method)
	}
	if !strings.HasPrefix(st.Path, "/") {
		return fmt.Errorf("field workload.start.path: %q does not start with /", st.Path)
	}
	tmpl, err := models.ParseTemplate(st.Body)
	if err != nil {
		return fmt.Errorf("field workload.start.body: %w", err)
	}
	if tmpl.Kind != models.TObject {
		return errors.New("field workload.start.body: want a JSON object template")
	}
	if st.Key != "" && !strings.Contains(st.Key, "{n}") {
		return fmt.Errorf("field workload.start.key: %q has no {n}: every saga would share one Idempotency-Key", st.Key)
	}
	for f, p := range map[string]string{"workload.start.id": st.ID, "workload.start.status": st.Status} {
		if !validPointer(p) {
			return fmt.Errorf("field %s: %q is not a JSON pointer", f, p)
		}
	}
	var terr error
	tmpl.Walk(func(n *models.TNode) {
		if terr != nil {
			return
		}
		switch n.Kind {
		case models.TResource:
			if !m.countedResource(n.Resource) {
				terr = fmt.Errorf("field workload.start.body: resource %q is not a counted resource of resources", n.Resource)
			}
		case models.TSum:
			if p := n.Sum.Price; p != nil && !m.countedResource(p.Resource) {
				terr = fmt.Errorf("field workload.start.body: sum price resource %q is not a counted resource of resources", p.Resource)
			}
		}
	})
	if terr != nil {
		return terr
	}
	if r := w.Read; r != nil && (!strings.HasPrefix(r.Path, "/") || !strings.Contains(r.Path, "{id}")) {
		return fmt.Errorf("field workload.read.path: %q does not start with / or has no {id}", r.Path)
	}
	if l := w.List; l != nil {
		if !strings.HasPrefix(l.Path, "/") {
			return fmt.Errorf("field workload.list.path: %q does not start with /", l.Path)
		}
		for f, p := range map[string]string{"items": l.Items, "id": l.ID, "status": l.Status, "key": l.Key, "trail": l.Trail} {
			if !validPointer(p) {
				return fmt.Errorf("field workload.list.%s: %q is not a JSON pointer", f, p)
			}
		}
	}
	return nil
}

func (m *Manifest) countedResource(name string) bool {
	for _, r := range m.Resources {
		if r.Name == name && r.Kind == "" {
			return true
		}
	}
	return false
}

func (m *Manifest) validateSaga() error {
	s := m.Saga
	if s.Name == "" {
		return errors.New("field saga.name: empty")
	}
	if len(s.Steps) == 0 {
		return errors.New("field saga.steps: empty")
	}
	for f, v := range map[string]string{"saga.pending": s.Pending, "saga.success": s.Success, "saga.failure": s.Failure} {
		if v == "" {
			return fmt.Errorf("field %s: empty", f)
		}
	}
	if s.Pending == s.Success || s.Pending == s.Failure || s.Success == s.Failure {
		return errors.New("field saga.success: pending, success and failure must be three different statuses")
	}
	switch s.StatusFrom {
	case "", models.StatusFromAPI:
		if m.Workload.List == nil && m.Workload.Read == nil {
			return errors.New("field workload.list: the saga's status comes from the API (saga.status_from), so the workload must declare list (or read)")
		}
	case models.StatusFromEvents:
		if s.SuccessEvent == "" || s.FailureEvent == "" {
			return errors.New("field saga.success_event: status_from events needs success_event and failure_event")
		}
		if len(m.Observe.Outbox) == 0 {
			return errors.New("field observe.outbox: status_from events reads the outbox rows, so observe.outbox must have a query")
		}
	default:
		return fmt.Errorf("field saga.status_from: %q is not api or events", s.StatusFrom)
	}
	if s.StepTimeoutMS < 0 {
		return fmt.Errorf("field saga.step_timeout_ms: %d is negative", s.StepTimeoutMS)
	}
	names := map[string]bool{}
	pivot := -1
	for i, st := range s.Steps {
		f := fmt.Sprintf("saga.steps[%d]", i)
		if st.Name == "" {
			return fmt.Errorf("field %s.name: empty", f)
		}
		if names[st.Name] {
			return fmt.Errorf("field %s.name: duplicate %q", f, st.Name)
		}
		names[st.Name] = true
		switch st.Kind {
		case models.Compensatable:
			if pivot >= 0 {
				return fmt.Errorf("field %s.kind: a compensatable step after the pivot (%s) could never be compensated", f, s.Steps[pivot].Name)
			}
			if st.Compensation == nil {
				return fmt.Errorf("field %s.compensation: a compensatable step needs its compensation", f)
			}
		case models.Pivot:
			if pivot >= 0 {
				return fmt.Errorf("field %s.kind: a second pivot (the first is %s)", f, s.Steps[pivot].Name)
			}
			pivot = i
		case models.Retriable:
			if st.Compensation != nil {
				return fmt.Errorf("field %s.compensation: a retriable step is never compensated", f)
			}
		default:
			return fmt.Errorf("field %s.kind: %q is not compensatable, pivot or retriable", f, st.Kind)
		}
		if err := m.validateEffect(f+".effect", st.Effect); err != nil {
			return err
		}
		if c := st.Compensation; c != nil {
			if c.Name == "" {
				return fmt.Errorf("field %s.compensation.name: empty", f)
			}
			if names[c.Name] {
				return fmt.Errorf("field %s.compensation.name: duplicate %q", f, c.Name)
			}
			names[c.Name] = true
			if err := m.validateEffect(f+".compensation.effect", c.Effect); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *Manifest) validateEffect(field string, e *models.EffectSpec) error {
	if e == nil {
		return nil
	}
	if e.Provider == "" {
		return fmt.Errorf("field %s.provider: empty", field)
	}
	p, ok := m.Provider(e.Provider)
	if !ok {
		return fmt.Errorf("field %s.provider: %q is not a provider of world", field, e.Provider)
	}
	if _, ok := p.Action(e.Action); !ok {
		return fmt.Errorf("field %s.action: %q is not an action of provider %s", field, e.Action, p.Name)
	}
	return nil
}

func (m *Manifest) validateResources() error {
	seen := map[string]bool{}
	for i, r := range m.Resources {
		f := fmt.Sprintf("resources[%d]", i)
		if r.Name == "" {
			return fmt.Errorf("field %s.name: empty", f)
		}
		if seen[r.Name] {
			return fmt.Errorf("field %s.name: duplicate %q", f, r.Name)
		}
		seen[r.Name] = true
		if r.HeldBy != nil && r.HeldBy.Quantity == "" {
			return fmt.Errorf("field %s.held_by.quantity: empty", f)
		}
		switch r.Kind {
		case models.ProviderPayments:
			p, ok := m.Provider(r.Provider)
			if !ok || p.Kind != models.ProviderPayments {
				return fmt.Errorf("field %s.provider: %q is not a provider of kind payments", f, r.Provider)
			}
			if r.HeldBy == nil || !strings.HasPrefix(r.HeldBy.Quantity, "/") {
				return fmt.Errorf("field %s.held_by.quantity: a payments resource needs the JSON pointer of the request's total", f)
			}
		case "":
			if r.Keys == nil && len(r.Amounts) == 0 {
				return fmt.Errorf("field %s.keys: a counted resource needs keys and initial, or amounts", f)
			}
			if r.Keys != nil {
				if r.Keys.Count.Min < 1 || r.Keys.Count.Max < r.Keys.Count.Min {
					return fmt.Errorf("field %s.keys.count: want 1 ≤ min ≤ max", f)
				}
				if r.Keys.Format != "" && !strings.Contains(r.Keys.Format, "{n}") {
					return fmt.Errorf("field %s.keys.format: %q has no {n}", f, r.Keys.Format)
				}
				if r.Initial == nil || r.Initial.Min < 0 || r.Initial.Max < r.Initial.Min {
					return fmt.Errorf("field %s.initial: want 0 ≤ min ≤ max", f)
				}
			}
		default:
			return fmt.Errorf("field %s.kind: unknown kind %q (known: payments; empty for a counted resource)", f, r.Kind)
		}
		if r.HeldBy != nil && m.Saga == nil {
			return fmt.Errorf("field %s.held_by: an outbox-only target (no saga) has no sagas to hold anything", f)
		}
	}
	return nil
}
