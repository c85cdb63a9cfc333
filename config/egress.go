package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Egress configures network mode "proxy": where sandboxes may connect
// through sandboxd (the deployment's layer of the policy), how names
// resolve, and the limits. The rules' grammar and the checks of this
// section belong to package egress (its family checks them at load).
type Egress struct {
	// Allow and Deny are the deployment's rules: host names with "*."
	// wildcards and an optional ":port", CIDRs for addresses. "*" alone
	// allows every public host name. With no allow rule nothing is
	// allowed: a proxy sandbox reaches only what the operator named.
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	// Hosts are the operator's resolver overrides, a name to one address
	// or a list of them. Their addresses are trusted as given; the refusal
	// of private and special ranges applies to what DNS answers.
	Hosts map[string]Addresses `yaml:"hosts"`
	// CAFiles are PEM files of more authorities the upstream servers of
	// intercepted hosts may be signed by, beside the system's.
	CAFiles []string `yaml:"ca_files"`
	// CADir holds the certificate authority sandboxd intercepts with
	// (ca.crt, ca.key; made there once when missing). Default: the data
	// dir's egress/. Replicas share one through a mounted Secret, so that a
	// sandbox trusts whichever replica serves it.
	CADir string `yaml:"ca_dir"`
	// MaxConnections caps the connections one sandbox has open through the
	// proxy (default 256).
	MaxConnections int `yaml:"max_connections"`
	// IdleTimeout closes a connection quiet both ways this long (default 5m).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// ConnectTimeout bounds resolving and connecting upstream (default 10s).
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// GET /v1/sandboxes/{id}/egress (default 1000).
}

// TenantEgress is a tenant's layer of the policy; it can only narrow the
// deployment's. Left out, the deployment's applies as it is.
type TenantEgress struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// Secret is a credential sandboxd adds to requests bound for its hosts, so
// that a sandbox uses it without ever holding it. Its value is read from a
// file or from sandboxd's environment at each use, never from the config.
type Secret struct {
	Name  string   `yaml:"name"`
	Hosts []string `yaml:"hosts"`
	// Header is the request header it is set in (default Authorization).
	Header string `yaml:"header"`
	// Format is the header's value with "{}" for the secret (default
	// "Bearer {}"); not with basic_auth.
	Format string `yaml:"format"`
	// BasicAuth sends it as the password of HTTP basic authentication.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
	// ValueFile or ValueEnv (exactly one) holds the value.
	ValueFile string `yaml:"value_file"`
	ValueEnv  string `yaml:"value_env"`
}

// BasicAuth is the user name a basic-auth secret is sent with.
type BasicAuth struct {
	Username string `yaml:"username"`
}

// Addresses is one address or a list of them.
type Addresses []string

// UnmarshalYAML takes a scalar or a sequence.
func (a *Addresses) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*a = Addresses{n.Value}
		return nil
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*a = l
		return nil
	}
	return fmt.Errorf("line %d: an address or a list of addresses is expected", n.Line)
}

// Defaults of the egress keys.
const (
	DefaultEgressMaxConnections = 256
)

// NetworkFor is the network mode a sandbox of tenant gets when its request
// names none: the tenant's default_network, else the deployment's, else
// "none".
func (c *Config) NetworkFor(tenant string) string {
	for _, t := range c.Tenants {
		if t.Name == tenant && t.DefaultNetwork != "" {
			return t.DefaultNetwork
		}
	}
	if c.DefaultNetwork != "" {
		return c.DefaultNetwork
	}
	return "none"
}

// checkNetworks checks the default_network keys.
func (c *Config) checkNetworks() error {
	ok := func(n string) bool { return n == "" || n == "none" || n == "bridge" || n == "proxy" }
	if !ok(c.DefaultNetwork) {
		return fmt.Errorf("default_network: %q is not a network mode; use \"none\", \"bridge\" or \"proxy\"", c.DefaultNetwork)
	}
	for i, t := range c.Tenants {
		if !ok(t.DefaultNetwork) {
			return fmt.Errorf("tenants[%d].default_network: %q is not a network mode; use \"none\", \"bridge\" or \"proxy\"", i, t.DefaultNetwork)
		}
	}
	return nil
}
