package egress

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func mustPolicy(t *testing.T, allow, deny []string) Policy {
	t.Helper()
	p, err := ParsePolicy(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHost(t *testing.T) {
	p := mustPolicy(t,
		[]string{"github.com", "*.example.com", "api.stripe.com:443", "10.0.0.0/8:5432", "8.8.8.0/24", "[2001:db8::/32]:443"},
		[]string{"secret.example.com", "*.internal.example.com", "github.com:22"})
	tests := []struct {
		host    string
		port    int
		allowed bool
		rule    string
	}{
		{"github.com", 443, true, "github.com"},
		{"GitHub.com.", 443, true, "github.com"},
		{"github.com", 22, false, "github.com:22"},       // deny wins over allow at that port
		{"www.github.com", 443, false, ""},               // exact rule: no subdomains
		{"a.example.com", 443, true, "*.example.com"},    // one level
		{"a.b.c.example.com", 80, true, "*.example.com"}, // any depth
		{"example.com", 443, false, ""},                  // the wildcard does not match the bare domain
		{"badexample.com", 443, false, ""},               // suffix without a dot boundary
		{"secret.example.com", 443, false, "secret.example.com"},
		{"x.secret.example.com", 443, true, "*.example.com"}, // the deny rule is exact
		{"db.internal.example.com", 443, false, "*.internal.example.com"},
		{"api.stripe.com", 443, true, "api.stripe.com:443"},
		{"api.stripe.com", 80, false, ""},
		{"pypi.org", 443, false, ""},
		// IP literals: only CIDR rules decide.
		{"10.1.2.3", 5432, true, "10.0.0.0/8:5432"},
		{"10.1.2.3", 22, false, ""},
		{"8.8.8.8", 53, true, "8.8.8.0/24"},
		{"9.9.9.9", 443, false, ""},
		{"[2001:db8::1]", 443, true, "[2001:db8::/32]:443"},
		{"2001:db8::1", 80, false, ""},
		{"::ffff:8.8.8.8", 53, true, "8.8.8.0/24"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%d", tt.host, tt.port), func(t *testing.T) {
			v := p.Host(tt.host, tt.port)
			if v.Allowed != tt.allowed || v.Rule != tt.rule || v.Why == "" {
				t.Errorf("Host(%q, %d) = %+v, want allowed %v by rule %q", tt.host, tt.port, v, tt.allowed, tt.rule)
			}
		})
	}
}

func TestHostRulesNeverMatchIPLiterals(t *testing.T) {
	// A name rule that happens to look like the address's text cannot
	// exist (ParseRule reads it as a CIDR), so check that a name-only policy
	// and an unrestricted one both refuse literals in special ranges, and
	// the name-only policy refuses public literals too.
	p := mustPolicy(t, []string{"*.com", "localhost"}, nil)
	for _, h := range []string{"127.0.0.1", "93.184.216.34", "[::1]"} {
		if v := p.Host(h, 443); v.Allowed {
			t.Errorf("Host(%q) = %+v under host-name rules only, want refused", h, v)
		}
	}
	u := Unrestricted()
	if v := u.Host("93.184.216.34", 443); !v.Allowed {
		t.Errorf("unrestricted Host(public literal) = %+v, want allowed", v)
	}
	if v := u.Host("169.254.169.254", 80); v.Allowed {
		t.Errorf("unrestricted Host(metadata literal) = %+v, want refused", v)
	}
}

func TestZeroPolicyAllowsNothing(t *testing.T) {
	var p Policy
	if v := p.Host("example.com", 443); v.Allowed {
		t.Errorf("zero Policy Host = %+v, want refused", v)
	}
	if v := Unrestricted().Host("example.com", 443); !v.Allowed {
		t.Errorf("Unrestricted Host = %+v, want allowed", v)
	}
	d := Policy{Unrestricted: true, Deny: []Rule{mustRule(t, "bad.com")}}
	if v := d.Host("bad.com", 443); v.Allowed || v.Rule != "bad.com" {
		t.Errorf("Unrestricted with deny Host = %+v, want refused by bad.com", v)
	}
}

func mustRule(t *testing.T, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAddrSpecialRanges checks each special range three ways: refused with no
// rule, allowed by an explicit CIDR for that range, and allowed when the
// operator's resolver override supplied the address.
func TestAddrSpecialRanges(t *testing.T) {
	tests := []struct {
		addr, rule, kind string
	}{
		{"0.0.0.0", "0.0.0.0/8", "unspecified"},
		{"127.0.0.1", "127.0.0.0/8", "loopback"},
		{"10.1.2.3", "10.0.0.0/8", "private (RFC 1918)"},
		{"172.16.5.4", "172.16.0.0/12", "private (RFC 1918)"},
		{"172.31.255.255", "172.31.0.0/16", "private (RFC 1918)"},
		{"192.168.1.1", "192.168.1.1", "private (RFC 1918)"},
		{"100.64.0.1", "100.64.0.0/10", "carrier-grade NAT"},
		{"169.254.169.254", "169.254.169.254/32", "link-local"},
		{"224.0.0.251", "224.0.0.0/4", "multicast"},
		{"255.255.255.255", "255.255.255.255", "reserved"},
		{"::", "::/128", "unspecified"},
		{"::1", "::1", "loopback"},
		{"fd12:3456::1", "fd00::/8", "unique-local (RFC 4193)"},
		{"fc00::1", "fc00::/7", "unique-local (RFC 4193)"},
		{"fe80::1", "fe80::/10", "link-local"},
		{"ff02::1", "ff00::/8", "multicast"},
		// IPv4-mapped IPv6 forms are the IPv4 address.
		{"::ffff:127.0.0.1", "127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "169.254.0.0/16", "link-local"},
		{"::ffff:10.0.0.1", "::ffff:10.0.0.0/104", "private (RFC 1918)"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.addr)
			none := mustPolicy(t, []string{"example.com", "0.0.0.0/0", "::/0"}, nil)
			v := none.Addr(ip, 443, false)
			if v.Allowed || v.Rule != "" {
				t.Fatalf("Addr(%s) with only broad CIDRs = %+v, want refused", tt.addr, v)
			}
			wantWhy := fmt.Sprintf("%s is a %s address and no allow rule names that range", ip.Unmap(), tt.kind)
			if v.Why != wantWhy {
				t.Errorf("Why = %q, want %q", v.Why, wantWhy)
			}
			// The same address as an IP literal host is refused too.
			if v := none.Host(tt.addr, 443); v.Allowed {
				t.Errorf("Host(%s) with only broad CIDRs = %+v, want refused", tt.addr, v)
			}
			ruled := mustPolicy(t, []string{"example.com", tt.rule}, nil)
			want := mustRule(t, tt.rule).String()
			if v := ruled.Addr(ip, 443, false); !v.Allowed || v.Rule != want {
				t.Errorf("Addr(%s) with rule %s = %+v, want allowed by %s", tt.addr, tt.rule, v, want)
			}
			if v := ruled.Host(tt.addr, 443); !v.Allowed || v.Rule != want {
				t.Errorf("Host(%s) with rule %s = %+v, want allowed by %s", tt.addr, tt.rule, v, want)
			}
			if v := none.Addr(ip, 443, true); !v.Allowed {
				t.Errorf("Addr(%s, trusted) = %+v, want allowed", tt.addr, v)
			}
		})
	}
}

func TestAddr(t *testing.T) {
	p := mustPolicy(t, []string{"*.example.com", "127.0.0.1/32:8080"}, []string{"203.0.113.0/24", "[2001:db8::/32]:443"})
	tests := []struct {
		addr    string
		port    int
		trusted bool
		allowed bool
		rule    string
	}{
		{"93.184.216.34", 443, false, true, ""},
		{"2606:2800:220:1::1", 443, false, true, ""},
		{"203.0.113.9", 443, false, false, "203.0.113.0/24"},
		{"203.0.113.9", 443, true, false, "203.0.113.0/24"}, // deny holds even for the operator's override
		{"::ffff:203.0.113.9", 80, false, false, "203.0.113.0/24"},
		{"2001:db8::5", 443, false, false, "[2001:db8::/32]:443"},
		{"2001:db8::5", 80, false, true, ""},
		{"127.0.0.1", 8080, false, true, "127.0.0.1/32:8080"},
		{"127.0.0.1", 8081, false, false, ""}, // the rule's port limits the range too
		{"127.0.0.2", 8080, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%d/%v", tt.addr, tt.port, tt.trusted), func(t *testing.T) {
			v := p.Addr(netip.MustParseAddr(tt.addr), tt.port, tt.trusted)
			if v.Allowed != tt.allowed || v.Rule != tt.rule {
				t.Errorf("Addr = %+v, want allowed %v by rule %q", v, tt.allowed, tt.rule)
			}
		})
	}
}

func TestLayeredSandboxCannotWiden(t *testing.T) {
	deployment := mustPolicy(t, []string{"*.example.com", "github.com", "pypi.org", "10.0.0.0/8"}, []string{"evil.example.com"})
	tenant := mustPolicy(t, []string{"*.example.com", "github.com", "10.1.0.0/16"}, nil)
	sandbox := mustPolicy(t, []string{"api.example.com", "evil.example.com", "pypi.org", "npmjs.org", "10.0.0.0/8", "github.com"}, nil)
	e := Layered(deployment, tenant, sandbox)
	tests := []struct {
		host    string
		allowed bool
		rule    string
		why     string
	}{
		{"api.example.com", true, "api.example.com", "allowed by rule api.example.com"},
		{"github.com", true, "github.com", "allowed by rule github.com"},
		{"www.example.com", false, "", "denied by the sandbox's policy: no allow rule matches www.example.com"},
		{"evil.example.com", false, "evil.example.com", "denied by the deployment's policy: denied by rule evil.example.com"},
		{"pypi.org", false, "", "denied by the tenant's policy: no allow rule matches pypi.org"},
		{"npmjs.org", false, "", "denied by the deployment's policy: no allow rule matches npmjs.org"},
		{"10.1.2.3", true, "10.0.0.0/8", "allowed by rule 10.0.0.0/8"},
		{"10.2.0.1", false, "", "denied by the tenant's policy: 10.2.0.1 is a private (RFC 1918) address and no allow rule names that range"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			v := e.Host(tt.host, 443)
			if v.Allowed != tt.allowed || v.Rule != tt.rule || v.Why != tt.why {
				t.Errorf("Host = %+v, want {%v %q %q}", v, tt.allowed, tt.rule, tt.why)
			}
		})
	}
	// A resolved private address: the sandbox's broad 10/8 cannot open what
	// the tenant limited to 10.1/16.
	if v := e.Addr(netip.MustParseAddr("10.2.0.1"), 443, false); v.Allowed || !strings.HasPrefix(v.Why, "denied by the tenant's policy: ") {
		t.Errorf("Addr(10.2.0.1) = %+v, want refused by the tenant", v)
	}
	if v := e.Addr(netip.MustParseAddr("10.1.0.1"), 443, false); !v.Allowed || v.Rule != "10.0.0.0/8" {
		t.Errorf("Addr(10.1.0.1) = %+v, want allowed by the sandbox's 10.0.0.0/8", v)
	}
	if v := e.Addr(netip.MustParseAddr("169.254.169.254"), 80, false); v.Allowed || !strings.HasPrefix(v.Why, "denied by the deployment's policy: ") {
		t.Errorf("Addr(metadata) = %+v, want refused by the deployment", v)
	}
	if v := e.Addr(netip.MustParseAddr("169.254.169.254"), 80, true); !v.Allowed {
		t.Errorf("Addr(metadata, trusted) = %+v, want allowed", v)
	}
}

func TestLayeredUnrestrictedAndZeroLayers(t *testing.T) {
	sandbox := mustPolicy(t, []string{"github.com"}, nil)
	e := Layered(Unrestricted(), Unrestricted(), sandbox)
	if v := e.Host("github.com", 443); !v.Allowed || v.Rule != "github.com" {
		t.Errorf("Host(github.com) = %+v, want allowed by github.com", v)
	}
	if v := e.Host("pypi.org", 443); v.Allowed || v.Why != "denied by the sandbox's policy: no allow rule matches pypi.org" {
		t.Errorf("Host(pypi.org) = %+v, want refused by the sandbox", v)
	}
	// A tenant whose policy is the zero Policy allows nothing, whatever
	// the sandbox asks for.
	z := Layered(Unrestricted(), Policy{}, sandbox)
	if v := z.Host("github.com", 443); v.Allowed || v.Why != "denied by the tenant's policy: no allow rule matches github.com" {
		t.Errorf("Host under a zero tenant Policy = %+v, want refused by the tenant", v)
	}
	open := Layered()
	if v := open.Host("anything.example", 443); !v.Allowed {
		t.Errorf("Layered() Host = %+v, want allowed", v)
	}
	if v := open.Addr(netip.MustParseAddr("127.0.0.1"), 443, false); v.Allowed {
		t.Errorf("Layered() Addr(loopback) = %+v, want refused", v)
	}
	if got := open.Allowed(); got != nil {
		t.Errorf("Layered().Allowed() = %q, want nil", got)
	}
}

func TestAllowed(t *testing.T) {
	deployment := mustPolicy(t, []string{"*.example.com", "github.com:443", "registry.npmjs.org", "10.0.0.0/8"}, []string{"bad.example.com"})
	tenant := Unrestricted()
	sandbox := mustPolicy(t, []string{"registry.npmjs.org", "github.com", "*.api.example.com:443", "bad.example.com", "pypi.org", "10.0.0.0/8"}, nil)
	got := Layered(deployment, tenant, sandbox).Allowed()
	want := []string{"registry.npmjs.org", "github.com", "*.api.example.com:443"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Allowed() = %q, want %q", got, want)
	}
	// With a sandbox layer that is Unrestricted, the tenant's list is shown.
	got = Layered(deployment, Unrestricted()).Allowed()
	want = []string{"*.example.com", "github.com:443", "registry.npmjs.org"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Allowed() = %q, want %q", got, want)
	}
}

func TestRefusalMessage(t *testing.T) {
	many := make([]string, 13)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.com", i+1)
	}
	tests := []struct {
		name    string
		host    string
		port    int
		allowed []string
		want    string
	}{
		{"two", "pypi.org", 443, []string{"registry.npmjs.org", "github.com"},
			"sandboxd: egress to pypi.org:443 is not allowed for this sandbox; allowed: registry.npmjs.org, github.com. Ask the operator to add it."},
		{"none", "pypi.org", 443, nil,
			"sandboxd: egress to pypi.org:443 is not allowed for this sandbox; nothing is allowed. Ask the operator to add it."},
		{"ten", "x.org", 80, many[:10],
			"sandboxd: egress to x.org:80 is not allowed for this sandbox; allowed: h1.com, h2.com, h3.com, h4.com, h5.com, h6.com, h7.com, h8.com, h9.com, h10.com. Ask the operator to add it."},
		{"capped", "x.org", 80, many,
			"sandboxd: egress to x.org:80 is not allowed for this sandbox; allowed: h1.com, h2.com, h3.com, h4.com, h5.com, h6.com, h7.com, h8.com, h9.com, h10.com and 3 more. Ask the operator to add it."},
		{"ipv6", "2001:db8::1", 443, []string{"github.com"},
			"sandboxd: egress to [2001:db8::1]:443 is not allowed for this sandbox; allowed: github.com. Ask the operator to add it."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RefusalMessage(tt.host, tt.port, tt.allowed); got != tt.want {
				t.Errorf("RefusalMessage\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}
