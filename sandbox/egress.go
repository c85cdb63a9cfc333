package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// NetworkProxy is the network mode in which a sandbox has no route out and
// reaches the world only through the agent's egress proxy, under a policy
// sandboxd applies (package egress).
const NetworkProxy = "proxy"

// EgressSpec is what a "proxy" sandbox was created with: its own layer of
// the egress policy (which can only narrow its tenant's) and the names of
// the tenant's secrets it may use. The policy can change later (PUT
// /v1/sandboxes/{id}/network); this stays what creation asked for.
type EgressSpec struct {
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
	// Open says the sandbox set no allow list of its own, so its tenant's
	// policy applies as it is (Allow is then empty).
	Open bool `json:"open,omitempty"`
	// Headers are set on the sandbox's requests to their hosts, with
	// values of its own (E2B's network rules); they are kept in this
	// label, so a credential that must not be readable on the host belongs
	// in a tenant's secret instead.
	Headers []EgressHeader `json:"headers,omitempty"`
}

// EgressHeader is a header set on a proxy sandbox's requests to Host (a
// host rule, as allow's: example.com, *.example.com, example.com:443).
type EgressHeader struct {
	Host  string `json:"host"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// NetworkLabels are the labels a backend stamps for spec's network: the
// mode always, the egress spec for a "proxy" sandbox.
func NetworkLabels(spec Spec) map[string]string {
	mode := spec.Network
	if mode == "" {
		mode = "none"
	}
	l := map[string]string{LabelNetwork: mode}
	if mode == NetworkProxy {
		e := spec.Egress
		if e == nil {
			e = &EgressSpec{Open: true}
		}
		b, _ := json.Marshal(e)
		l[LabelEgress] = string(b)
	}
	return l
}

// NetworkOf is the network mode info was created with ("none" for a
// sandbox made before the label).
func NetworkOf(info Info) string {
	if m := info.Labels[LabelNetwork]; m != "" {
		return m
	}
	return "none"
}

// EgressOf is the egress spec a "proxy" sandbox was created with. A label
// that does not parse is an error: the sandbox must then get no egress at
// all rather than a guess.
func EgressOf(info Info) (EgressSpec, error) {
	raw, ok := info.Labels[LabelEgress]
	if !ok {
		return EgressSpec{Open: true}, nil
	}
	var e EgressSpec
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return EgressSpec{}, fmt.Errorf("the egress label of sandbox %s does not parse (%v)", info.ID, err)
	}
	return e, nil
}

// ErrNoAnnotations says the backend cannot set a label after creation.
var ErrNoAnnotations = errors.New("the backend cannot change a sandbox's labels after creation")

// Annotate sets key on the tenant's sandbox id, where the backend can
// (Annotator), and in the manager's map at once; ErrNoAnnotations where it
// cannot.
func (m *Manager) Annotate(ctx context.Context, tenant, id, key, value string) error {
	a, ok := m.backend.(Annotator)
	if !ok {
		return ErrNoAnnotations
	}
	m.mu.Lock()
	e := m.byID[id]
	mine := e != nil && e.info.Tenant == tenant && !e.removing
	m.mu.Unlock()
	if !mine {
		return errNoSandbox(id)
	}
	if err := a.Annotate(ctx, id, key, value); err != nil {
		return m.backendErr("annotate sandbox "+id, err)
	}
	m.mu.Lock()
	if e := m.byID[id]; e != nil {
		labels := maps.Clone(e.info.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = value
		info := e.info
		info.Labels = labels
		e.setInfo(info)
	}
	m.mu.Unlock()
	return nil
}
