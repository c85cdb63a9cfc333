package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Another API served over the same sandboxes (package e2b) is mounted
// under a prefix of the listener, behind its own authentication, and may
// own a family of host names ({port}-{sandbox}.{domain}).

// MountPrefix is where WithE2B mounts its handler: every path under it is
// the handler's.
const MountPrefix = "/e2b/"

// WithE2B mounts the handler build makes under MountPrefix. build gets the
// finished server, whose exported methods (CreateSandbox, ServePort,
// Network, SetNetwork) the handler calls per request. owns, when not nil,
// says which requests belong to the handler whatever their path (its
// sandboxes' host names, its signed URLs).
func WithE2B(build func(s *Server) http.Handler, owns func(r *http.Request) bool) Option {
	return func(s *Server) { s.mountBuild, s.mountOwns = build, owns }
}

// SetRequestTenant names the tenant in the request log line of the
// request ctx belongs to, for a mounted API that authenticates on its own.
func SetRequestTenant(ctx context.Context, tenant string) {
	if ri, _ := ctx.Value(reqInfoKey).(*reqInfo); ri != nil {
		ri.mu.Lock()
		ri.tenant = tenant
		ri.mu.Unlock()
	}
}

// MountSandboxPrefix is the mounted API's requests into a sandbox: their
// bodies (uploads, input streamed to a process, a proxied app's requests)
// last as long as the sandbox's side lets them, like the port proxy's, so
// they are not held to the API's body pace.
const MountSandboxPrefix = "/e2b/sandbox"

// mounted is the route of the mounted handler; nil when none is.
func (s *Server) mounted() http.Handler {
	if s.mount == nil {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MountSandboxPrefix || strings.HasPrefix(r.URL.Path, MountSandboxPrefix+"/") {
			if p, ok := r.Body.(*pacedBody); ok {
				r.Body = p.ReadCloser
			}
			http.NewResponseController(w).SetReadDeadline(time.Time{})
		}
		s.mount.ServeHTTP(w, r)
	})
}

// mountedHost reports whether r belongs to the mounted handler whatever
// its path.
func (s *Server) mountedHost(r *http.Request) bool {
	return s.mount != nil && s.mountOwns != nil && s.mountOwns(r)
}

// PortOptions say how ServePort passes a request on.
type PortOptions struct {
	// Prefix is taken off the path ("" for none).
	Prefix string
	// Host, when set, is the Host header the app gets, from the sandbox
	// (its labels); "" keeps the proxy's localhost:{port}.
	Host func(info sandbox.Info) string
	// Fail writes what fails once the proxy has the request, in the
	// caller's own API's shape.
	Fail func(w http.ResponseWriter, status int, code, msg string)
}

// ServePort passes r to port inside the tenant's sandbox id through its
// agent (the port proxy of /v1/sandboxes/{id}/ports/{port}/). What fails
// before the app answers is returned, or, once the proxy has the request,
// written by o.Fail.
func (s *Server) ServePort(w http.ResponseWriter, r *http.Request, tenant, id string, port int, o PortOptions) error {
	_, info, err := s.pipe(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	prefix := o.Prefix
	if !strings.HasPrefix(r.URL.Path, prefix) {
		prefix = ""
	}
	var host string
	if o.Host != nil {
		host = o.Host(info)
	}
	s.forwardWith(w, r, info, port, prefix, host, o.Fail)
	return nil
}

// Network is GET /v1/sandboxes/{id}/network for the tenant's sandbox.
func (s *Server) Network(ctx context.Context, tenant, id string) (gateway.Status, error) {
	info, err := s.networkSandbox(ctx, tenant, id)
	if err != nil {
		return gateway.Status{}, err
	}
	return s.egress.Network(ctx, info)
}

// SetNetwork is PUT /v1/sandboxes/{id}/network for the tenant's sandbox.
func (s *Server) SetNetwork(ctx context.Context, tenant, id string, p gateway.Policy) (gateway.Status, error) {
	info, err := s.networkSandbox(ctx, tenant, id)
	if err != nil {
		return gateway.Status{}, err
	}
	return s.egress.SetNetwork(ctx, info, p)
}

func (s *Server) networkSandbox(ctx context.Context, tenant, id string) (sandbox.Info, error) {
	if s.egress == nil {
		return sandbox.Info{}, errdefs.Unavailable("this sandboxd serves no egress proxy; a sandbox's network is what it was created with")
	}
	info, err := s.sandboxes.Get(ctx, tenant, id)
	if err != nil || info.Tenant != tenant {
		return sandbox.Info{}, errdefs.NotFound("sandbox %q does not exist; list your sandboxes to see their ids", id)
	}
	return info, nil
}
