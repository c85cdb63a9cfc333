package config

import (
	"fmt"
	"slices"
)

// Runtimes a sandbox can run under: the engine's runc, or gVisor.
var knownRuntimes = []string{"runc", "gvisor"}

// RuntimeFor is the runtime a sandbox of tenant gets when its request names
// none: the tenant's runtime, else the deployment's, else runc.
func (c *Config) RuntimeFor(tenant string) string {
	for _, t := range c.Tenants {
		if t.Name == tenant && t.Runtime != "" {
			return t.Runtime
		}
	}
	if c.Runtime != "" {
		return c.Runtime
	}
	return "runc"
}

// RuntimesFor are the runtimes tenant may ask for; nil: any the deployment
// serves.
func (c *Config) RuntimesFor(tenant string) []string {
	for _, t := range c.Tenants {
		if t.Name == tenant && len(t.Runtimes) > 0 {
			return t.Runtimes
		}
	}
	return nil
}

// ReadOnlyRootFor is the default read_only_root of tenant's sandboxes.
func (c *Config) ReadOnlyRootFor(tenant string) bool {
	for _, t := range c.Tenants {
		if t.Name == tenant {
			return t.ReadOnlyRoot
		}
	}
	return false
}

// checkRuntimes checks the runtime keys: known names, and a tenant's
// default among the runtimes it may use.
func (c *Config) checkRuntimes() error {
	ok := func(r string) bool { return r == "" || slices.Contains(knownRuntimes, r) }
	if !ok(c.Runtime) {
		return fmt.Errorf("runtime: %q is not a runtime; use \"runc\" or \"gvisor\"", c.Runtime)
	}
	for i, t := range c.Tenants {
		if !ok(t.Runtime) {
			return fmt.Errorf("tenants[%d].runtime: %q is not a runtime; use \"runc\" or \"gvisor\"", i, t.Runtime)
		}
		for j, r := range t.Runtimes {
			if r == "" || !ok(r) {
				return fmt.Errorf("tenants[%d].runtimes[%d]: %q is not a runtime; use \"runc\" or \"gvisor\"", i, j, r)
			}
		}
		if len(t.Runtimes) > 0 {
			def := t.Runtime
			if def == "" {
				def = c.Runtime
			}
			if def == "" {
				def = "runc"
			}
			if !slices.Contains(t.Runtimes, def) {
				return fmt.Errorf("tenants[%d]: its default runtime %q is not among its runtimes %v; add it there or set tenants[%d].runtime to one of them", i, def, t.Runtimes, i)
			}
		}
	}
	return nil
}
