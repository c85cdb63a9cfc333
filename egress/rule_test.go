package egress

import (
	"strings"
	"testing"
)

func TestParseRuleGood(t *testing.T) {
	tests := []struct {
		in, want string
		cidr     bool
		port     int
	}{
		{"example.com", "example.com", false, 0},
		{"Example.COM", "example.com", false, 0},
		{"*.example.com", "*.example.com", false, 0},
		{"*.Example.com:443", "*.example.com:443", false, 443},
		{"registry.npmjs.org:443", "registry.npmjs.org:443", false, 443},
		{"localhost", "localhost", false, 0},
		{"_dmarc.example.com", "_dmarc.example.com", false, 0},
		{"example.com:1", "example.com:1", false, 1},
		{"example.com:65535", "example.com:65535", false, 65535},
		{"example.com:0443", "example.com:443", false, 443},
		{"10.0.0.0/8", "10.0.0.0/8", true, 0},
		{"169.254.169.254/32", "169.254.169.254/32", true, 0},
		{"fd00::/8", "fd00::/8", true, 0},
		{"10.0.0.0/8:5432", "10.0.0.0/8:5432", true, 5432},
		{"[fd00::/8]:443", "[fd00::/8]:443", true, 443},
		{"[fd00::/8]", "fd00::/8", true, 0},
		{"[10.0.0.0/8]:80", "10.0.0.0/8:80", true, 80},
		{"127.0.0.1", "127.0.0.1/32", true, 0},
		{"127.0.0.1:8080", "127.0.0.1/32:8080", true, 8080},
		{"::1", "::1/128", true, 0},
		{"[::1]:443", "[::1/128]:443", true, 443},
		{"FD00::1", "fd00::1/128", true, 0},
		{"::ffff:10.0.0.1", "10.0.0.1/32", true, 0},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", true, 0},
		{"0.0.0.0/0", "0.0.0.0/0", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if r.IsCIDR() != tt.cidr || r.Port() != tt.port {
				t.Errorf("IsCIDR() = %v, Port() = %d; want %v, %d", r.IsCIDR(), r.Port(), tt.cidr, tt.port)
			}
		})
	}
}

func TestParseRuleBad(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `the rule is empty; write a host name such as example.com, *.example.com or example.com:443, or a CIDR such as 10.0.0.0/8`},
		{"example .com", `rule "example .com" contains a space; write one host name or CIDR per entry, such as example.com`},
		{"https://example.com/simple", `rule "https://example.com/simple" has a scheme; write only the host name, as example.com`},
		{"http://user@example.com:8080", `rule "http://user@example.com:8080" has a scheme; write only the host name, as example.com:8080`},
		{"pypi.org/simple", `rule "pypi.org/simple" has a path; write only the host name, as pypi.org`},
		{"a..example.com", `rule "a..example.com" has an empty label; write the name without a leading, trailing or doubled dot, as example.com`},
		{"example.com.", `rule "example.com." has an empty label; write the name without a leading, trailing or doubled dot, as example.com`},
		{".example.com", `rule ".example.com" has an empty label; write the name without a leading, trailing or doubled dot, as example.com`},
		{"*.", `rule "*." names no domain; write a wildcard with its domain, as *.example.com`},
		{"*", `rule "*" names no domain; write a wildcard with its domain, as *.example.com`},
		{"a.*.example.com", `rule "a.*.example.com" has a "*" that is not the whole first label; write a wildcard only as *.example.com`},
		{"*example.com", `rule "*example.com" has a "*" that is not the whole first label; write a wildcard only as *.example.com`},
		{"exa!mple.com", `rule "exa!mple.com" contains '!', which cannot appear in a host name; use only letters, digits, hyphens and dots, as example.com`},
		{"bücher.de", `rule "bücher.de" contains 'ü', which cannot appear in a host name; use only letters, digits, hyphens and dots, as example.com`},
		{"example.com:", `rule "example.com:" ends in a colon with no port; write a port from 1 to 65535 after it, as example.com:443, or leave the colon off to allow any port`},
		{"example.com:https", `rule "example.com:https" has port "https", which is not a number; write a port from 1 to 65535, as example.com:443`},
		{"example.com:+443", `rule "example.com:+443" has port "+443", which is not a number; write a port from 1 to 65535, as example.com:443`},
		{"example.com:0", `rule "example.com:0" has port 0, outside 1 to 65535; write a port in that range, or leave it off to allow any port`},
		{"example.com:65536", `rule "example.com:65536" has port 65536, outside 1 to 65535; write a port in that range, or leave it off to allow any port`},
		{"example.com:99999999999999999999", `rule "example.com:99999999999999999999" has port 99999999999999999999, outside 1 to 65535; write a port in that range, or leave it off to allow any port`},
		{"10.0.0.300", `rule "10.0.0.300" looks like an IP address but is not one; write an address such as 10.0.0.1 or a CIDR such as 10.0.0.0/8`},
		{"10.0.0.0/33", `rule "10.0.0.0/33" is not a valid CIDR; write an address and a prefix length within the address's bits, such as 10.0.0.0/8 or fd00::/8`},
		{"10.1.2.3/8", `rule "10.1.2.3/8" has address bits set beyond its /8 prefix; write 10.0.0.0/8`},
		{"fd00::/8:443", `rule "fd00::/8:443" gives a port after an IPv6 CIDR without brackets; write [fd00::/8]:443`},
		{"[fd00::/8", `rule "[fd00::/8" opens a bracket it never closes; write an IPv6 address or CIDR with a port as [fd00::/8]:443`},
		{"[fd00::/8]443", `rule "[fd00::/8]443" has "443" after the closing bracket; write only a port there, as [fd00::/8]:443`},
		{"[example.com]:443", `rule "[example.com]:443" puts "example.com" in brackets, which are only for IPv6 addresses; write a host name with a port as example.com:443 or an IPv6 CIDR as [fd00::/8]:443`},
		{"fe80::1%eth0", `rule "fe80::1%eth0" has an interface zone; write the address without the %zone part`},
		{"fd00::zz", `rule "fd00::zz" is not a valid IPv6 address; write an address such as fd00::1, a CIDR such as fd00::/8, or with a port [fd00::/8]:443`},
		{strings.Repeat("a", 64) + ".com", `rule "` + strings.Repeat("a", 64) + `.com" has a label longer than 63 characters; write a real host name such as example.com`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err == nil {
				t.Fatalf("ParseRule(%q) = %q, want an error", tt.in, r)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

func TestParsePolicyNamesTheEntry(t *testing.T) {
	_, err := ParsePolicy([]string{"a.com", "b.com", "https://c.com"}, nil)
	want := `allow[2]: rule "https://c.com" has a scheme; write only the host name, as c.com`
	if err == nil || err.Error() != want {
		t.Errorf("allow error = %v, want %s", err, want)
	}
	_, err = ParsePolicy([]string{"a.com"}, []string{"10.0.0.0/8", "x y"})
	want = `deny[1]: rule "x y" contains a space; write one host name or CIDR per entry, such as example.com`
	if err == nil || err.Error() != want {
		t.Errorf("deny error = %v, want %s", err, want)
	}
	p, err := ParsePolicy([]string{"a.com", "*.b.com:443"}, []string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Allow) != 2 || len(p.Deny) != 1 || p.Allow[1].String() != "*.b.com:443" {
		t.Errorf("ParsePolicy = %+v", p)
	}
}

// FuzzParseRule checks that no input panics the parser and that every rule it
// accepts renders to a canonical form that parses back to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "10.0.0.0/8:5432", "[fd00::/8]:443",
		"::1", "127.0.0.1", "::ffff:10.0.0.0/104", "https://x/y", "[::1]", "a..b", "fe80::1%eth0", "*.", "[", "]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if err.Error() == "" || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseRule(%q) error is not one line: %q", s, err)
			}
			return
		}
		c := r.String()
		r2, err := ParseRule(c)
		if err != nil {
			t.Fatalf("ParseRule(%q) = %q, which does not parse back: %v", s, c, err)
		}
		if r2 != r {
			t.Fatalf("ParseRule(%q) = %#v, but its form %q parses to %#v", s, r, c, r2)
		}
	})
}
