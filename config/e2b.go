package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// E2B configures the E2B API sandboxd serves under /e2b (package e2b).
// Every key may be left out.
type E2B struct {
	// Disabled turns the E2B API off (it is served by default).
	Disabled bool `yaml:"disabled"`
	// Templates maps E2B template names to images. Without it, "base" (the
	// SDK's default) and "code-interpreter-v1" (@e2b/code-interpreter's
	// default: the image has the kernels the code interpreter runs on) are
	// the default image. sandboxd builds no templates.
	Templates map[string]string `yaml:"templates"`
	// Domain, when set, makes {port}-{sandbox id}.{domain} a sandbox's host
	// names (the SDK's getHost); it needs a wildcard DNS record for
	// *.{domain} pointing at sandboxd.
	Domain string `yaml:"domain"`
	// PublicPorts lets a request to a sandbox's port through its host name
	// without the sandbox's access token, as E2B does by default.
	PublicPorts bool `yaml:"public_ports"`
	// Network is the network of an E2B sandbox that does not turn internet
	// access off: "" (the tenant's default_network), "none", "bridge" or
	// "proxy".
	Network string `yaml:"network"`
	// User is the account of the sandbox that commands and file operations
	// run as when a request names none ("" is E2B's "user"); relative paths
	// are taken from its home. A sandbox whose image has no such account
	// runs them as root.
	User string `yaml:"user"`
	// NoSudo makes E2B sandboxes like sandboxd's own: no process gains
	// privileges through a set-user-ID program (no-new-privileges), so sudo
	// from an account that is not root fails. By default an E2B sandbox's
	// accounts can use sudo, as on E2B.
	NoSudo bool `yaml:"no_sudo"`
}

// E2BTemplates is the template map with its default filled in.
func (c *Config) E2BTemplates() map[string]string {
	if len(c.E2B.Templates) > 0 {
		return c.E2B.Templates
	}
	img := c.DefaultImage
	if img == "" {
		img = DefaultImage
	}
	return map[string]string{"base": img, "code-interpreter-v1": img}
}

// Check reports the first bad value of the e2b section.
func (e E2B) Check() error {
	for _, name := range slices.Sorted(maps.Keys(e.Templates)) {
		img := e.Templates[name]
		switch {
		case name == "" || strings.ContainsAny(name, " /\t"):
			return fmt.Errorf("e2b.templates: template name %q is not a plain name; use letters, digits, '-', '_' or ':'", name)
		case strings.TrimSpace(img) == "":
			return fmt.Errorf("e2b.templates.%s: the image is empty; give the image sandboxes of this template run, such as sandboxd-sandbox:latest", name)
		}
	}
	switch e.Network {
	case "", "none", "bridge", "proxy":
	default:
		return fmt.Errorf("e2b.network: %q is not a network mode; use none, bridge or proxy, or leave it out for the tenant's default_network", e.Network)
	}
	if u := e.User; u != "" && (strings.ContainsAny(u, ": \t/\n") || len(u) > 32) {
		return fmt.Errorf("e2b.user: %q is not an account name; give the name of an account of the sandbox image's /etc/passwd, such as user", u)
	}
	d := e.Domain
	switch {
	case d == "":
	case strings.Contains(d, "://") || strings.ContainsAny(d, "/:*"):
		return fmt.Errorf("e2b.domain: %q is not a bare domain; write only the name sandbox hosts live under, such as e2b.example.com", d)
	case strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || !strings.Contains(d, ".") && d != "localhost":
		return fmt.Errorf("e2b.domain: %q is not a domain with a dot in it; write it as e2b.example.com (no leading or trailing dot)", d)
	case strings.ToLower(d) != d:
		return fmt.Errorf("e2b.domain: %q has upper-case letters; host names are matched in lower case, write it so", d)
	}
	return nil
}
