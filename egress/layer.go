package egress

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Effective is the policy a sandbox runs under: its layers, outermost first
// (deployment, tenant, sandbox). A connection passes only when every layer
// allows it, so an inner layer can narrow the outer ones but never widen them.
type Effective struct {
	layers []Policy
}

// Layered combines the layers outermost first: deployment, tenant, sandbox.
// A layer with no limits of its own is Unrestricted(); the zero Policy in a
// layer refuses everything. With no layers at all, one Unrestricted layer
// applies, which still refuses special ranges.
func Layered(layers ...Policy) Effective {
	if len(layers) == 0 {
		layers = []Policy{Unrestricted()}
	}
	return Effective{layers: append([]Policy(nil), layers...)}
}

// layerName names a layer by its position for a refusal's reason.
func layerName(i int) string {
	switch i {
	case 0:
		return "deployment"
	case 1:
		return "tenant"
	case 2:
		return "sandbox"
	}
	return "layer " + strconv.Itoa(i+1)
}

// Host decides a host name or IP literal over every layer.
func (e Effective) Host(host string, port int) Verdict {
	return e.decide(func(p Policy) Verdict { return p.Host(host, port) })
}

// Addr decides a resolved address over every layer.
func (e Effective) Addr(ip netip.Addr, port int, trusted bool) Verdict {
	return e.decide(func(p Policy) Verdict { return p.Addr(ip, port, trusted) })
}

// decide returns the first refusing layer's verdict, its reason naming the
// layer; when all allow, the innermost verdict that names a rule.
func (e Effective) decide(f func(Policy) Verdict) Verdict {
	var last Verdict
	for i, p := range e.layers {
		v := f(p)
		if !v.Allowed {
			v.Why = "denied by the " + layerName(i) + "'s policy: " + v.Why
			return v
		}
		if v.Rule != "" || last.Rule == "" {
			last = v
		}
	}
	return last
}

// Allowed lists the host rules a refusal message offers. It approximates
// "the hosts every layer allows": the allow rules of the innermost layer that
// has any (skipping Unrestricted layers), kept when every layer allows the
// rule's own name (for a wildcard, a name one label below it) at the rule's
// port, where a rule without a port counts as allowed when some allow rule
// matches the name at any port and no portless deny rule refuses it. CIDR
// rules are not listed.
func (e Effective) Allowed() []string {
	inner := -1
	for i := len(e.layers) - 1; i >= 0; i-- {
		if !e.layers[i].Unrestricted {
			inner = i
			break
		}
	}
	if inner < 0 {
		return nil
	}
	var out []string
	for _, r := range e.layers[inner].Allow {
		if r.IsCIDR() {
			continue
		}
		probe := r.host
		if r.wildcard {
			probe = "x." + r.host
		}
		ok := true
		for _, p := range e.layers {
			if !p.allowsName(probe, r.port) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r.String())
		}
	}
	return out
}

// allowsName reports whether the layer allows name at port, where port 0
// means "some port": any allow rule for the name counts, and only a deny
// rule without a port refuses.
func (p Policy) allowsName(name string, port int) bool {
	match := func(r Rule) bool {
		if port == 0 {
			return r.matchesHost(name, r.port)
		}
		return r.matchesHost(name, port)
	}
	for _, r := range p.Deny {
		if match(r) && (port != 0 || r.port == 0) {
			return false
		}
	}
	if p.Unrestricted {
		return true
	}
	for _, r := range p.Allow {
		if match(r) {
			return true
		}
	}
	return false
}

// maxListed caps the hosts a refusal message names.
const maxListed = 10

// RefusalMessage is the one sentence a refused program shows, as the body of
// the proxy's 403: it names the destination, what is allowed, and who can
// change it.
func RefusalMessage(host string, port int, allowed []string) string {
	dest := host
	if port != 0 {
		dest = net.JoinHostPort(host, strconv.Itoa(port))
	}
	var b strings.Builder
	b.WriteString("sandboxd: egress to ")
	b.WriteString(dest)
	b.WriteString(" is not allowed for this sandbox; ")
	if len(allowed) == 0 {
		b.WriteString("nothing is allowed")
	} else {
		b.WriteString("allowed: ")
		n := min(len(allowed), maxListed)
		b.WriteString(strings.Join(allowed[:n], ", "))
		if len(allowed) > n {
			b.WriteString(" and " + strconv.Itoa(len(allowed)-n) + " more")
		}
	}
	b.WriteString(". Ask the operator to add it.")
	return b.String()
}
