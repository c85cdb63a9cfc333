package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// What the API serves of the gateway: the network part of a sandbox's
// creation, its policy (GET and PUT /v1/sandboxes/{id}/network) and its
// recent decisions (GET /v1/sandboxes/{id}/egress).

// Policy is a sandbox's own allow and deny lists, the body of PUT
// /v1/sandboxes/{id}/network.
type Policy struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny,omitempty"`
	// Headers, when not nil, replace the sandbox's own headers
	// (sandbox.EgressSpec.Headers); nil keeps them. Set by a front end
	// (E2B's network rules), never by the JSON API.
	Headers *[]sandbox.EgressHeader `json:"-"`
}

// Layer is one level of a sandbox's policy as configured.
type Layer struct {
	Name  string   `json:"name"` // deployment, tenant or sandbox
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
	// Restricts says the level lists destinations of its own; one that
	// does not lets through what the others allow.
	Restricts bool `json:"restricts"`
}

// Status is a sandbox's network as GET /v1/sandboxes/{id}/network shows it.
type Status struct {
	Network string `json:"network"` // none, bridge or proxy
	// Proxy is the proxy's URL inside the sandbox, once its agent
	// started it ("" before the first tool call reached the sandbox).
	Proxy string `json:"proxy,omitempty"`
	// Allow and Deny are the sandbox's own lists (creation's, or the last
	// PUT's).
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
	// Allowed is what a refusal offers: the host rules every level allows.
	Allowed []string `json:"allowed"`
	// Layers are the levels a connection must pass, outermost first.
	Layers []Layer `json:"layers"`
	// NotEffective are the sandbox's allow rules an outer level refuses: a
	// sandbox can narrow its tenant's policy, never widen it.
	NotEffective []string `json:"not_effective,omitempty"`
	// Secrets are the names of the secrets sent for the sandbox, and
	// "header:{name}@{host}" for each of its own headers (never a value).
	Secrets         []string `json:"secrets"`
	OpenConnections int      `json:"open_connections"`
}

// Record is one decision as GET /v1/sandboxes/{id}/egress lists it.
type Record struct {
	Time         time.Time `json:"time"`
	Tenant       string    `json:"tenant"`
	Sandbox      string    `json:"sandbox"`
	Conversation string    `json:"conversation"`
	// Kind is connect (a tunnel), intercept (a request in a tunnel opened
	// to add a secret) or http (a plain-HTTP request).
	Kind       string   `json:"kind"`
	Host       string   `json:"host"`
	Port       int      `json:"port"`
	Addr       string   `json:"addr,omitempty"` // the address connected to
	Rule       string   `json:"rule,omitempty"`
	Decision   string   `json:"decision"` // allow or deny
	Reason     string   `json:"reason"`
	Secrets    []string `json:"secrets,omitempty"` // names only
	BytesUp    int64    `json:"bytes_up"`
	BytesDown  int64    `json:"bytes_down"`
	DurationMS int64    `json:"duration_ms"`
}

// Prepare completes the network part of a sandbox about to be created for
// tenant: the tenant's (or deployment's) default mode when the request
// named none, and for "proxy" the sandbox's own rules and secrets, checked.
func (g *Gateway) Prepare(tenant string, spec *sandbox.Spec) error {
	t := g.tenant(tenant)
	if spec.Network == "" {
		spec.Network = t.network
	}
	if spec.Network != sandbox.NetworkProxy {
		if spec.Egress != nil && (len(spec.Egress.Allow)+len(spec.Egress.Deny)+len(spec.Egress.Secrets)+len(spec.Egress.Headers) > 0) {
			return errdefs.InvalidArgument("egress rules and secrets apply only to network \"proxy\", and this sandbox's network is %q; set \"network\": \"proxy\" or leave egress and secrets out", spec.Network)
		}
		spec.Egress = nil
		return nil
	}
	e := spec.Egress
	if e == nil {
		e = &sandbox.EgressSpec{}
	}
	if _, err := parseLayer(e.Allow, e.Deny); err != nil {
		return errdefs.InvalidArgument("egress.%v; fix the rule", err)
	}
	seen := map[string]bool{}
	for _, name := range e.Secrets {
		if _, ok := t.secrets[name]; !ok {
			return errdefs.InvalidArgument("secret %q is not one of tenant %s's secrets (%s); name one of those, or ask the operator to add it", name, tenant, names(t))
		}
		if seen[name] {
			return errdefs.InvalidArgument("secret %q is listed twice; name each secret once", name)
		}
		seen[name] = true
	}
	if _, err := headerSecrets(e.Headers); err != nil {
		return err
	}
	e.Open = len(e.Allow) == 0
	spec.Egress = e
	return nil
}

// Network is the sandbox's network and, for "proxy", its policy.
func (g *Gateway) Network(ctx context.Context, info sandbox.Info) (Status, error) {
	mode := sandbox.NetworkOf(info)
	if mode != sandbox.NetworkProxy {
		return Status{Network: mode, Allow: []string{}, Deny: []string{}, Allowed: []string{}, Layers: []Layer{}, Secrets: []string{}}, nil
	}
	b := g.boxFor(info)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.statusLocked(b), nil
}

// SetNetwork replaces the sandbox's own lists. New connections follow at
// once; open ones the new policy refuses are cut.
func (g *Gateway) SetNetwork(ctx context.Context, info sandbox.Info, p Policy) (Status, error) {
	if mode := sandbox.NetworkOf(info); mode != sandbox.NetworkProxy {
		return Status{}, errdefs.FailedPrecondition("sandbox %s has network %q, and egress rules apply only to network \"proxy\"; create the sandbox with \"network\": \"proxy\"", info.ID, mode)
	}
	l, err := parseLayer(p.Allow, p.Deny)
	if err != nil {
		return Status{}, errdefs.InvalidArgument("%v; fix the rule", err)
	}
	b := g.boxFor(info)
	g.mu.Lock()
	headers := b.headers
	g.mu.Unlock()
	if p.Headers != nil {
		headers = *p.Headers
	}
	if headers == nil {
		// Kept as [], not null, which would read back as "no change".
		headers = []sandbox.EgressHeader{}
	}
	hs, err := headerSecrets(headers)
	if err != nil {
		return Status{}, err
	}
	if err := g.keep(ctx, info, change{Allow: p.Allow, Deny: p.Deny, Headers: &headers}); err != nil {
		return Status{}, err
	}
	g.mu.Lock()
	b.own, b.headers = l, headers
	eff := g.effective(b.tenant, l)
	secrets := append(b.named(), hs...)
	g.mu.Unlock()
	b.gate.SetPolicy(eff)
	b.gate.SetSecrets(secrets)
	g.log.Info("egress policy changed", "tenant", info.Tenant, "sandbox", info.ID, "allow", strings.Join(p.Allow, ","), "deny", strings.Join(p.Deny, ","))
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.statusLocked(b), nil
}

// Decisions are the sandbox's recent decisions, newest first.
func (g *Gateway) Decisions(ctx context.Context, info sandbox.Info, limit int) ([]Record, error) {
	out := []Record{}
	if sandbox.NetworkOf(info) != sandbox.NetworkProxy {
		return out, nil
	}
	for _, d := range g.boxFor(info).gate.Recent(limit) {
		out = append(out, recordOf(d))
	}
	return out, nil
}

func recordOf(d egress.Decision) Record {
	r := Record{Time: d.Time.UTC(), Tenant: d.Tenant, Sandbox: d.Sandbox, Conversation: d.Conversation, Kind: d.Kind,
		Host: d.Host, Port: d.Port, Addr: d.Addr, Rule: d.Rule, Decision: "deny", Reason: d.Reason,
		Secrets: slices.Clone(d.Secrets), BytesUp: d.BytesUp, BytesDown: d.BytesDown, DurationMS: d.Duration.Milliseconds()}
	if d.Allowed {
		r.Decision = "allow"
	}
	return r
}

func (g *Gateway) statusLocked(b *box) Status {
	eff := g.effective(b.tenant, b.own)
	st := Status{
		Network: sandbox.NetworkProxy, Proxy: b.proxy,
		Allow: nonNil(b.own.allow), Deny: nonNil(b.own.deny),
		Allowed: nonNil(eff.Allowed()),
		Layers: []Layer{
			{Name: "deployment", Allow: nonNil(g.conf.deployment.allow), Deny: nonNil(g.conf.deployment.deny), Restricts: g.conf.deployment.named},
			{Name: "tenant", Allow: nonNil(b.tenant.layer.allow), Deny: nonNil(b.tenant.layer.deny), Restricts: b.tenant.layer.named},
			{Name: "sandbox", Allow: nonNil(b.own.allow), Deny: nonNil(b.own.deny), Restricts: b.own.named},
		},
		Secrets:         append(nonNil(b.secrets), headerNames(b.headers)...),
		OpenConnections: b.gate.Open(),
	}
	// The outer levels alone, as if the sandbox allowed everything (outer
	// levels that name nothing allow nothing, so then none of the
	// sandbox's rules is in effect).
	outer := g.effective(b.tenant, layer{policy: egress.Unrestricted()})
	for _, a := range b.own.allow {
		r, err := egress.ParseRule(a)
		if err != nil || r.IsCIDR() {
			continue
		}
		host := strings.TrimPrefix(r.String(), "*.")
		if strings.HasPrefix(r.String(), "*.") {
			host = "x." + host
		}
		host, port := splitRulePort(host, r.Port())
		if !outer.Host(host, port).Allowed {
			st.NotEffective = append(st.NotEffective, a)
		}
	}
	return st
}

// splitRulePort drops the ":port" a rule's canonical form ends in, and
// picks 443 for a rule that names no port.
func splitRulePort(s string, port int) (string, int) {
	if port != 0 {
		s = strings.TrimSuffix(s, fmt.Sprintf(":%d", port))
		return s, port
	}
	return s, 443
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
