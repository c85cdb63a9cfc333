package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Verdict is one decision about a connection.
type Verdict struct {
	Allowed bool
	// Rule is the canonical form of the rule that decided, "" when none did
	// (no rule matched, or a special range refused the address).
	Rule string
	// Why is a short reason in words, for the decision record.
	Why string
}

// Policy is one layer's rules. The zero Policy allows nothing: with no allow
// rule, nothing matches. A layer that sets no limits of its own is
// Unrestricted(), not the zero Policy, so that a forgotten allow list refuses
// everything rather than opening everything.
type Policy struct {
	Allow, Deny []Rule
	// Unrestricted makes every host name pass that no deny rule refuses.
	// Literal and resolved addresses still need an explicit CIDR to reach a
	// special range, and deny rules still refuse.
	Unrestricted bool
}

// Unrestricted is the layer with no limits of its own.
func Unrestricted() Policy { return Policy{Unrestricted: true} }

// ParsePolicy parses the allow and deny lists; an error names the entry, as
// "allow[2]: ...".
func ParsePolicy(allow, deny []string) (Policy, error) {
	var p Policy
	for i, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			return Policy{}, fmt.Errorf("allow[%d]: %w", i, err)
		}
		p.Allow = append(p.Allow, r)
	}
	for i, s := range deny {
		r, err := ParseRule(s)
		if err != nil {
			return Policy{}, fmt.Errorf("deny[%d]: %w", i, err)
		}
		p.Deny = append(p.Deny, r)
	}
	return p, nil
}

// Host decides a connection to a host as the program named it, before any
// resolution. A deny rule wins over an allow rule. An IP literal ("10.0.0.1",
// "[::1]") is decided by CIDR rules alone, as Addr decides a resolved address
// except that no resolver can vouch for it.
func (p Policy) Host(host string, port int) Verdict {
	name := normalizeHost(host)
	if ip, err := netip.ParseAddr(name); err == nil {
		return p.literal(ip, port)
	}
	for _, r := range p.Deny {
		if r.matchesHost(name, port) {
			return Verdict{Rule: r.String(), Why: "denied by rule " + r.String()}
		}
	}
	for _, r := range p.Allow {
		if r.matchesHost(name, port) {
			return Verdict{Allowed: true, Rule: r.String(), Why: "allowed by rule " + r.String()}
		}
	}
	if p.Unrestricted {
		return Verdict{Allowed: true, Why: "the policy sets no limits on host names"}
	}
	return Verdict{Why: "no allow rule matches " + name}
}

// literal decides an IP literal host: it needs an allow CIDR even when public.
func (p Policy) literal(ip netip.Addr, port int) Verdict {
	ip = ip.Unmap().WithZone("")
	if v, done := p.deniedAddr(ip, port); done {
		return v
	}
	if v, special := p.specialAddr(ip, port); special {
		return v
	}
	for _, r := range p.Allow {
		if r.matchesAddr(ip, port) {
			return Verdict{Allowed: true, Rule: r.String(), Why: "allowed by rule " + r.String()}
		}
	}
	if p.Unrestricted {
		return Verdict{Allowed: true, Why: "the policy sets no limits on public addresses"}
	}
	return Verdict{Why: "no allow CIDR holds the IP literal " + ip.String()}
}

// Addr decides an address that an allowed name resolved to. A deny CIDR
// refuses it; an address in a special range is refused unless an allow CIDR
// inside that range holds it or trusted says the address came from the
// operator's own resolver override; any other address passes, since the
// name was already allowed.
func (p Policy) Addr(ip netip.Addr, port int, trusted bool) Verdict {
	ip = ip.Unmap().WithZone("")
	if v, done := p.deniedAddr(ip, port); done {
		return v
	}
	if trusted {
		return Verdict{Allowed: true, Why: "address from the operator's resolver override"}
	}
	if v, special := p.specialAddr(ip, port); special {
		return v
	}
	return Verdict{Allowed: true, Why: "public address"}
}

func (p Policy) deniedAddr(ip netip.Addr, port int) (Verdict, bool) {
	for _, r := range p.Deny {
		if r.matchesAddr(ip, port) {
			return Verdict{Rule: r.String(), Why: "denied by rule " + r.String()}, true
		}
	}
	return Verdict{}, false
}

// specialAddr decides an address in a special range: allowed only by an allow
// CIDR that lies inside the range, so "0.0.0.0/0" never opens the metadata
// address. special is false for an address in no special range.
func (p Policy) specialAddr(ip netip.Addr, port int) (v Verdict, special bool) {
	rng, ok := specialRange(ip)
	if !ok {
		return Verdict{}, false
	}
	for _, r := range p.Allow {
		if r.matchesAddr(ip, port) && r.prefix.Bits() >= rng.prefix.Bits() && rng.prefix.Contains(r.prefix.Addr()) {
			return Verdict{Allowed: true, Rule: r.String(), Why: "allowed by rule " + r.String()}, true
		}
	}
	return Verdict{Why: fmt.Sprintf("%s is a %s address and no allow rule names that range", ip, rng.name)}, true
}

// normalizeHost lower-cases a host, drops a trailing dot and the brackets
// around an IPv6 literal.
func normalizeHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return host
}

type namedRange struct {
	prefix netip.Prefix
	name   string
}

// specialRanges are the ranges a resolved name may not reach without an
// explicit rule: nothing in them is a public service, and several (the
// metadata address, loopback, the cluster's private networks) hold exactly
// what a sandbox must not reach.
var specialRanges = []namedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local (RFC 4193)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

func specialRange(ip netip.Addr) (namedRange, bool) {
	for _, r := range specialRanges {
		if r.prefix.Contains(ip) {
			return r, true
		}
	}
	return namedRange{}, false
}
