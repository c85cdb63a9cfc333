package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/sandbox"
)

// The sandbox's listening ports and the port proxy: a tenant's request for
// /v1/sandboxes/{id}/ports/{port}/{path...} passed to 127.0.0.1:{port}
// inside the sandbox through the agent's dial (package ports).

// portProxy passes a request to a port in a sandbox (ports.Proxy).
type portProxy interface {
	Serve(w http.ResponseWriter, r *http.Request, t ports.Target)
}

var _ portProxy = (*ports.Proxy)(nil)

// proxy is the previews service's proxy, or one of the server's own.
func (s *Server) proxy() portProxy {
	if s.previews != nil {
		return s.previews
	}
	s.ownProxyOnce.Do(func() { s.ownProxy = ports.NewProxy() })
	return s.ownProxy
}

func (s *Server) listPorts(w http.ResponseWriter, r *http.Request, tenant string) error {
	c, _, err := s.pipe(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	ps, err := c.Ports(r.Context())
	if err != nil {
		return err
	}
	if ps == nil {
		ps = []proto.ListeningPort{}
	}
	writeJSON(w, http.StatusOK, ps)
	return nil
}

func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, tenant string) error {
	port, err := portOf(r.PathValue("port"))
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	_, info, err := s.pipe(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	prefix := "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port)
	s.forward(w, r, info, port, prefix)
	return nil
}

// forward hands r to the proxy for port of info's sandbox, the body no
// longer under the API's pace: an upload or a WebSocket lasts as long as
// the app in the sandbox lets it.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, info sandbox.Info, port int, prefix string) {
	s.forwardWith(w, r, info, port, prefix, "", func(w http.ResponseWriter, status int, code, msg string) {
		writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
	})
}

// forwardWith is forward with the proxy's errors written by fail.
func (s *Server) forwardWith(w http.ResponseWriter, r *http.Request, info sandbox.Info, port int, prefix, host string,
	fail func(w http.ResponseWriter, status int, code, msg string)) {
	if p, ok := r.Body.(*pacedBody); ok {
		r.Body = p.ReadCloser
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	s.proxy().Serve(w, r, ports.Target{Sandbox: info.ID, Port: port, StripPrefix: prefix, Mount: prefix, Host: host,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			// The pipe of the moment: a connection dialed after the pipe
			// reopened goes through the new one.
			cur, _, err := s.pipeOf(ctx, info)
			if err != nil {
				return nil, err
			}
			return cur.Dial(ctx, &proto.DialRequest{Network: "tcp", Address: addr})
		},
		Fail: fail})
}

// portOf reads a port from the path.
func portOf(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errdefs.InvalidArgument("port %q is not a number; give the TCP port (1–65535) the server listens on inside the sandbox", v)
	}
	return n, ports.CheckPort(n)
}

// pipe is the agent pipe of the tenant's sandbox id, looked up in the
// backend once and then taken from the manager by id, so a page with a
// hundred sub-resources costs no engine call per request.
func (s *Server) pipe(ctx context.Context, tenant, id string) (*agent.Client, sandbox.Info, error) {
	s.knownMu.Lock()
	info, ok := s.known[id]
	s.knownMu.Unlock()
	if ok && info.Tenant == tenant {
		c, got, err := s.pipeOf(ctx, info)
		if !errors.Is(err, errdefs.ErrNotFound) {
			return c, got, err
		}
		s.knownMu.Lock()
		delete(s.known, id)
		s.knownMu.Unlock()
	}
	info, err := s.sandboxes.Get(ctx, tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && info.Tenant != tenant) {
		return nil, sandbox.Info{}, errdefs.NotFound("sandbox %q does not exist; list your sandboxes with GET /v1/sandboxes", id)
	}
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	c, got, err := s.pipeOf(ctx, info)
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	s.knownMu.Lock()
	if s.known == nil || len(s.known) >= maxKnownSandboxes {
		s.known = map[string]sandbox.Info{}
	}
	s.known[id] = sandbox.Info{ID: info.ID, Tenant: info.Tenant, Conversation: info.Conversation}
	s.knownMu.Unlock()
	return c, got, nil
}

// maxKnownSandboxes caps the sandboxes pipe remembers.
const maxKnownSandboxes = 4096

// pipeOf is the agent pipe of a sandbox already looked up.
func (s *Server) pipeOf(ctx context.Context, info sandbox.Info) (*agent.Client, sandbox.Info, error) {
	if by, ok := s.sandboxes.(agentOf); ok {
		return by.AgentOf(ctx, info)
	}
	c, got, err := s.sandboxes.Agent(ctx, info.Tenant, info.Conversation)
	if err == nil && got.ID != info.ID {
		return nil, sandbox.Info{}, errdefs.NotFound("sandbox %s is gone; its conversation has another sandbox now", info.ID)
	}
	return c, got, err
}

// known is pipe's memory of sandboxes by id.
type knownSandboxes struct {
	knownMu sync.Mutex              // guards known
	known   map[string]sandbox.Info // identity fields only
}
