package api

import (
	"slices"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// RuntimePolicy is what a tenant's sandboxes may run under (the config's,
// per deployment and tenant).
type RuntimePolicy struct {
	// Default is the runtime of a request that names none ("" is runc).
	Default string
	// Allowed are the runtimes the tenant may ask for; nil: any.
	Allowed []string
	// ReadOnlyRoot is the default of a request's read_only_root.
	ReadOnlyRoot bool
}

// WithRuntimePolicy gives each tenant's runtime policy.
func WithRuntimePolicy(p func(tenant string) RuntimePolicy) Option {
	return func(s *Server) { s.runtimePolicy = p }
}

// runtimeSpec sets spec's runtime and root file system from the request
// over the tenant's policy. Whether the backend and its engine can serve
// the runtime is theirs to say.
func (s *Server) runtimeSpec(tenant string, req CreateSandboxRequest, spec *sandbox.Spec) error {
	var p RuntimePolicy
	if s.runtimePolicy != nil {
		p = s.runtimePolicy(tenant)
	}
	r := req.Runtime
	if r == "" {
		r = p.Default
	}
	if r == "" {
		r = sandbox.RuntimeRunc
	}
	if err := sandbox.ValidateRuntime(r); err != nil {
		return err
	}
	if p.Allowed != nil && !slices.Contains(p.Allowed, r) {
		return errdefs.InvalidArgument("tenant %s may not use runtime %q; ask for one of %v, or leave runtime out", tenant, r, p.Allowed)
	}
	spec.Runtime = r
	spec.ReadOnlyRoot = p.ReadOnlyRoot
	if req.ReadOnlyRoot != nil {
		spec.ReadOnlyRoot = *req.ReadOnlyRoot
	}
	return nil
}
