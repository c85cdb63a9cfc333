package gateway

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/egress"
)

// AdminTenant is the tenant of the admin token (api.AdminTenantName), the
// one the top-level secrets belong to when no tenants are configured.
const AdminTenant = "admin"

// layer is one level of the policy as configured.
type layer struct {
	policy egress.Policy
	// named says the level lists destinations of its own (an allow rule,
	// or "*"). When no level of a sandbox does, nothing is allowed: a
	// proxy sandbox reaches only what someone named.
	named bool
	allow []string // as written, for GET .../network
	deny  []string
}

// parseLayer reads one level's lists. "*" in allow lets every host name
// through that no deny rule refuses (addresses still need CIDRs, special
// ranges explicit ones). A level with neither list restricts nothing of
// its own.
func parseLayer(allow, deny []string) (layer, error) {
	var rest []string
	star := false
	for _, a := range allow {
		if strings.TrimSpace(a) == "*" {
			star = true
			continue
		}
		rest = append(rest, a)
	}
	p, err := egress.ParsePolicy(rest, deny)
	if err != nil {
		return layer{}, err
	}
	l := layer{policy: p, named: star || len(rest) > 0, allow: slices.Clone(allow), deny: slices.Clone(deny)}
	if len(allow) == 0 || star {
		p.Unrestricted = true
		l.policy = p
	}
	return l, nil
}

// tenantConf is what one tenant's sandboxes are held to.
type tenantConf struct {
	layer   layer
	secrets map[string]egress.Secret
	names   []string // the secrets' names, sorted
	network string   // default network mode
}

// parsed is the egress part of the config, checked.
type parsed struct {
	deployment layer
	tenants    map[string]*tenantConf
	hosts      map[string][]netip.Addr
	roots      *x509.CertPool // the system's authorities and ca_files
}

var (
	secretName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// parseConfig checks and reads the egress keys of cfg. Every error names
// the key, says what is wrong and what to do.
func parseConfig(cfg *config.Config) (*parsed, error) {
	p := &parsed{tenants: map[string]*tenantConf{}, hosts: map[string][]netip.Addr{}}
	var err error
	e := cfg.Egress
	if p.deployment, err = parseLayer(e.Allow, e.Deny); err != nil {
		return nil, fmt.Errorf("egress.%w; fix the rule", err)
	}
	switch {
	case e.MaxConnections < 0:
		return nil, fmt.Errorf("egress.max_connections: %d is negative; give a positive number or leave it out for %d", e.MaxConnections, config.DefaultEgressMaxConnections)
	case e.IdleTimeout < 0 || e.ConnectTimeout < 0:
		return nil, fmt.Errorf("egress.idle_timeout: it and connect_timeout must be positive durations, such as \"5m\"; leave them out for the defaults")
	}
	if e.CADir != "" && !filepath.IsAbs(e.CADir) {
		return nil, fmt.Errorf("egress.ca_dir: %q is not an absolute path; give the directory holding ca.crt and ca.key from the root", e.CADir)
	}
	for name, addrs := range e.Hosts {
		key := strings.ToLower(strings.TrimSuffix(name, "."))
		if _, err := egress.ParseRule(key); err != nil || strings.HasPrefix(key, "*.") || strings.Contains(key, ":") || strings.Contains(key, "/") {
			return nil, fmt.Errorf("egress.hosts: %q is not a host name; give a name such as pypi.test", name)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("egress.hosts.%s: has no address; give an IP address such as 127.0.0.1", name)
		}
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("egress.hosts.%s: %q is not an IP address; give one such as 127.0.0.1", name, a)
			}
			p.hosts[key] = append(p.hosts[key], ip.Unmap())
		}
	}
	if p.roots, err = x509.SystemCertPool(); err != nil || p.roots == nil {
		p.roots = x509.NewCertPool()
	}
	for i, f := range e.CAFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("egress.ca_files[%d]: %s cannot be read (%v); give a readable PEM file", i, f, err)
		}
		if !appendPEM(p.roots, b) {
			return nil, fmt.Errorf("egress.ca_files[%d]: %s holds no PEM certificate; give the authority's certificate in PEM", i, f)
		}
	}

	if len(cfg.Tenants) == 0 {
		t, err := parseTenant("", cfg.DefaultNetwork, nil, cfg.Secrets)
		if err != nil {
			return nil, err
		}
		p.tenants[AdminTenant] = t
		return p, nil
	}
	if len(cfg.Secrets) > 0 {
		return nil, fmt.Errorf("secrets: with tenants configured the top-level secrets belong to no one; list each secret under its tenant's tenants[].secrets")
	}
	for i, tc := range cfg.Tenants {
		var allow, deny []string
		if tc.Egress != nil {
			allow, deny = tc.Egress.Allow, tc.Egress.Deny
		}
		t, err := parseTenant(fmt.Sprintf("tenants[%d].", i), cfg.NetworkFor(tc.Name), &layerKeys{allow, deny}, tc.Secrets)
		if err != nil {
			return nil, err
		}
		p.tenants[tc.Name] = t
	}
	return p, nil
}

type layerKeys struct{ allow, deny []string }

func parseTenant(prefix, network string, keys *layerKeys, secrets []config.Secret) (*tenantConf, error) {
	t := &tenantConf{secrets: map[string]egress.Secret{}, network: network}
	if t.network == "" {
		t.network = "none"
	}
	var err error
	if keys != nil {
		if t.layer, err = parseLayer(keys.allow, keys.deny); err != nil {
			return nil, fmt.Errorf("%segress.%w; fix the rule", prefix, err)
		}
	} else {
		t.layer, _ = parseLayer(nil, nil)
	}
	for i, s := range secrets {
		key := fmt.Sprintf("%ssecrets[%d]", prefix, i)
		sec, err := parseSecret(key, s)
		if err != nil {
			return nil, err
		}
		if _, dup := t.secrets[sec.Name]; dup {
			return nil, fmt.Errorf("%s.name: secret %q is listed twice; give each secret one entry", key, sec.Name)
		}
		t.secrets[sec.Name] = sec
		t.names = append(t.names, sec.Name)
	}
	slices.Sort(t.names)
	return t, nil
}

func parseSecret(key string, s config.Secret) (egress.Secret, error) {
	out := egress.Secret{Name: s.Name, Header: s.Header, Format: s.Format}
	switch {
	case !secretName.MatchString(s.Name):
		return out, fmt.Errorf("%s.name: %q is not valid; use 1 to 63 lower-case letters, digits, '-' or '_'", key, s.Name)
	case len(s.Hosts) == 0:
		return out, fmt.Errorf("%s.hosts: is empty; name the hosts the secret is sent to, such as api.github.com", key)
	case s.Header != "" && !headerName.MatchString(s.Header):
		return out, fmt.Errorf("%s.header: %q is not a header name; give one such as Authorization", key, s.Header)
	case s.BasicAuth != nil && s.Format != "":
		return out, fmt.Errorf("%s.format: a basic_auth secret has no format (the header is \"Basic\" and the encoded user and secret); leave format out", key)
	case s.BasicAuth != nil && (s.BasicAuth.Username == "" || strings.Contains(s.BasicAuth.Username, ":")):
		return out, fmt.Errorf("%s.basic_auth.username: is empty or holds ':'; give the user name the secret is the password of", key)
	case s.Format != "" && strings.Count(s.Format, "{}") != 1:
		return out, fmt.Errorf("%s.format: %q must hold \"{}\" exactly once, where the secret goes, such as \"Bearer {}\"", key, s.Format)
	case (s.ValueFile == "") == (s.ValueEnv == ""):
		return out, fmt.Errorf("%s: give exactly one of value_file and value_env, where sandboxd reads the secret", key)
	case s.ValueEnv != "" && !envName.MatchString(s.ValueEnv):
		return out, fmt.Errorf("%s.value_env: %q is not an environment variable name", key, s.ValueEnv)
	}
	for i, h := range s.Hosts {
		r, err := egress.ParseRule(h)
		if err != nil {
			return out, fmt.Errorf("%s.hosts[%d]: %w", key, i, err)
		}
		if r.IsCIDR() {
			return out, fmt.Errorf("%s.hosts[%d]: %q is an address range; a secret is sent to named hosts only (their certificate is checked by name), so give a host name", key, i, h)
		}
		out.Hosts = append(out.Hosts, r)
	}
	if out.Header == "" {
		out.Header = "Authorization"
	}
	if s.BasicAuth != nil {
		out.Basic, out.BasicUser = true, s.BasicAuth.Username
	} else if out.Format == "" {
		out.Format = "Bearer {}"
	}
	name := s.Name
	if s.ValueFile != "" {
		path := s.ValueFile
		// Read at each use: a rotated file takes effect at once.
		out.Value = func() (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("secret %s cannot be read from its value_file (%v)", name, err)
			}
			v := strings.TrimRight(string(b), "\r\n")
			if v == "" {
				return "", fmt.Errorf("secret %s's value_file is empty", name)
			}
			return v, nil
		}
	} else {
		env := s.ValueEnv
		out.Value = func() (string, error) {
			v, ok := os.LookupEnv(env)
			if !ok || v == "" {
				return "", fmt.Errorf("secret %s's value_env %s is not set in sandboxd's environment", name, env)
			}
			return v, nil
		}
	}
	return out, nil
}

func appendPEM(pool *x509.CertPool, b []byte) bool {
	any := false
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return any
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(c)
		any = true
	}
}
