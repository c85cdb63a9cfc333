package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRuleLen caps a rule's length; a host name is at most 253 characters,
// and a CIDR with brackets and a port is far shorter.
const maxRuleLen = 300

// Rule is one parsed allow or deny entry. Two rules that match the same
// connections compare equal with ==.
type Rule struct {
	// host is the lower-case name without the "*." of a wildcard; empty for
	// a CIDR rule.
	host string
	// wildcard says the rule matches subdomains of host, never host itself.
	wildcard bool
	// prefix is the masked CIDR of an address rule; invalid for a host rule.
	prefix netip.Prefix
	// port is the one port matched; 0 matches every port.
	port int
}

// IsCIDR reports whether the rule matches addresses rather than names.
func (r Rule) IsCIDR() bool { return r.prefix.IsValid() }

// Port is the port the rule is limited to, or 0 for any port.
func (r Rule) Port() int { return r.port }

// String renders the canonical form, which ParseRule reads back to an equal
// rule: names lower-case, a bare address as its /32 or /128 CIDR, an IPv6
// CIDR with a port in brackets.
func (r Rule) String() string {
	var s string
	switch {
	case r.IsCIDR():
		s = r.prefix.String()
		if r.port != 0 && r.prefix.Addr().Is6() {
			return "[" + s + "]:" + strconv.Itoa(r.port)
		}
	case r.wildcard:
		s = "*." + r.host
	default:
		s = r.host
	}
	if r.port != 0 {
		s += ":" + strconv.Itoa(r.port)
	}
	return s
}

// matchesHost reports whether a host-name rule matches the lower-case name.
func (r Rule) matchesHost(name string, port int) bool {
	if r.IsCIDR() || !r.portMatches(port) {
		return false
	}
	if r.wildcard {
		return len(name) > len(r.host)+1 && strings.HasSuffix(name, "."+r.host)
	}
	return name == r.host
}

// matchesAddr reports whether a CIDR rule holds the unmapped address.
func (r Rule) matchesAddr(ip netip.Addr, port int) bool {
	return r.IsCIDR() && r.portMatches(port) && r.prefix.Contains(ip)
}

func (r Rule) portMatches(port int) bool { return r.port == 0 || r.port == port }

const ruleExamples = "a host name such as example.com, *.example.com or example.com:443, or a CIDR such as 10.0.0.0/8"

// ParseRule reads one allow or deny entry; see the package documentation for
// the forms. Every error is one sentence naming what was wrong and what to
// write instead.
func ParseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, fmt.Errorf("the rule is empty; write %s", ruleExamples)
	}
	if len(s) > maxRuleLen {
		return Rule{}, fmt.Errorf("rule %.40q... is %d characters long, more than any host name or CIDR; write %s", s, len(s), ruleExamples)
	}
	if strings.ContainsAny(s, " \t\r\n\v\f") {
		return Rule{}, fmt.Errorf("rule %q contains a space; write one host name or CIDR per entry, such as example.com", s)
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return Rule{}, fmt.Errorf("rule %q has a scheme; write only the host name, as %s", s, hostOnly(s[i+3:]))
	}
	if strings.HasPrefix(s, "[") {
		return parseBracketed(s)
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		if _, err := netip.ParseAddr(s[:i]); err != nil {
			return Rule{}, fmt.Errorf("rule %q has a path; write only the host name, as %s", s, hostOnly(s))
		}
		return parseCIDRWithPort(s)
	}
	if strings.Count(s, ":") > 1 {
		// More than one colon is an IPv6 address; a port needs brackets.
		return parseAddrRule(s, s, 0)
	}
	name, port := s, 0
	if i := strings.IndexByte(s, ':'); i >= 0 {
		p, err := parsePort(s, s[i+1:])
		if err != nil {
			return Rule{}, err
		}
		name, port = s[:i], p
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return parseAddrRule(s, name, port)
	}
	return parseHost(s, name, port)
}

// hostOnly strips a scheme's remainder down to its host and port, for the
// suggestion in an error message.
func hostOnly(s string) string {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "example.com"
	}
	return s
}

func parsePort(rule, p string) (int, error) {
	if p == "" {
		return 0, fmt.Errorf("rule %q ends in a colon with no port; write a port from 1 to 65535 after it, as example.com:443, or leave the colon off to allow any port", rule)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("rule %q has port %q, which is not a number; write a port from 1 to 65535, as example.com:443", rule, p)
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("rule %q has port %s, outside 1 to 65535; write a port in that range, or leave it off to allow any port", rule, p)
	}
	return n, nil
}

// parseBracketed reads "[addr]", "[addr]:port", "[cidr]" and "[cidr]:port".
func parseBracketed(s string) (Rule, error) {
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return Rule{}, fmt.Errorf("rule %q opens a bracket it never closes; write an IPv6 address or CIDR with a port as [fd00::/8]:443", s)
	}
	inner, rest := s[1:end], s[end+1:]
	port := 0
	if rest != "" {
		if rest[0] != ':' {
			return Rule{}, fmt.Errorf("rule %q has %q after the closing bracket; write only a port there, as [fd00::/8]:443", s, rest)
		}
		p, err := parsePort(s, rest[1:])
		if err != nil {
			return Rule{}, err
		}
		port = p
	}
	if strings.Contains(inner, "/") {
		return parsePrefixRule(s, inner, port)
	}
	if _, err := netip.ParseAddr(inner); err != nil && !strings.Contains(inner, "%") {
		return Rule{}, fmt.Errorf("rule %q puts %q in brackets, which are only for IPv6 addresses; write a host name with a port as example.com:443 or an IPv6 CIDR as [fd00::/8]:443", s, inner)
	}
	return parseAddrRule(s, inner, port)
}

// parseCIDRWithPort reads an unbracketed CIDR with an optional port after
// the prefix length: "10.0.0.0/8" or "10.0.0.0/8:5432".
func parseCIDRWithPort(s string) (Rule, error) {
	slash := strings.IndexByte(s, '/')
	colon := strings.LastIndexByte(s, ':')
	if colon < slash {
		return parsePrefixRule(s, s, 0)
	}
	cidr := s[:colon]
	port, err := parsePort(s, s[colon+1:])
	if err != nil {
		return Rule{}, err
	}
	if p, err := netip.ParsePrefix(cidr); err == nil && p.Addr().Is6() {
		return Rule{}, fmt.Errorf("rule %q gives a port after an IPv6 CIDR without brackets; write [%s]:%d", s, cidr, port)
	}
	return parsePrefixRule(s, cidr, port)
}

func parsePrefixRule(rule, cidr string, port int) (Rule, error) {
	if strings.Contains(cidr, "%") {
		return Rule{}, fmt.Errorf("rule %q has an interface zone; write the CIDR without the %%zone part", rule)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q is not a valid CIDR; write an address and a prefix length within the address's bits, such as 10.0.0.0/8 or fd00::/8", rule)
	}
	if m := p.Masked(); m != p {
		return Rule{}, fmt.Errorf("rule %q has address bits set beyond its /%d prefix; write %s", rule, p.Bits(), m)
	}
	// An IPv4-mapped CIDR is kept as the IPv4 CIDR it names, since addresses
	// are unmapped before they are matched.
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return Rule{prefix: p, port: port}, nil
}

func parseAddrRule(rule, addr string, port int) (Rule, error) {
	if strings.Contains(addr, "%") {
		return Rule{}, fmt.Errorf("rule %q has an interface zone; write the address without the %%zone part", rule)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q is not a valid IPv6 address; write an address such as fd00::1, a CIDR such as fd00::/8, or with a port [fd00::/8]:443", rule)
	}
	ip = ip.Unmap()
	return Rule{prefix: netip.PrefixFrom(ip, ip.BitLen()), port: port}, nil
}

func parseHost(rule, name string, port int) (Rule, error) {
	wildcard := false
	if strings.HasPrefix(name, "*.") {
		wildcard, name = true, name[2:]
	}
	if name == "" || name == "*" {
		return Rule{}, fmt.Errorf("rule %q names no domain; write a wildcard with its domain, as *.example.com", rule)
	}
	if strings.Contains(name, "*") {
		return Rule{}, fmt.Errorf("rule %q has a \"*\" that is not the whole first label; write a wildcard only as *.example.com", rule)
	}
	if len(name) > 253 {
		return Rule{}, fmt.Errorf("rule %q names a host longer than 253 characters; write a real host name such as example.com", rule)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return Rule{}, fmt.Errorf("rule %q has an empty label; write the name without a leading, trailing or doubled dot, as example.com", rule)
		}
		if len(l) > 63 {
			return Rule{}, fmt.Errorf("rule %q has a label longer than 63 characters; write a real host name such as example.com", rule)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				bad, _ := utf8.DecodeRuneInString(l[i:])
				return Rule{}, fmt.Errorf("rule %q contains %q, which cannot appear in a host name; use only letters, digits, hyphens and dots, as example.com", rule, bad)
			}
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return Rule{}, fmt.Errorf("rule %q looks like an IP address but is not one; write an address such as 10.0.0.1 or a CIDR such as 10.0.0.0/8", rule)
	}
	return Rule{host: strings.ToLower(name), wildcard: wildcard, port: port}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
