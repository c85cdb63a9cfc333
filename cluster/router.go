package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools"
)

// RunLookup finds any run by id, whoever owns it, without touching it;
// ctx is the request's, and bounds what it asks of shared run records.
type RunLookup interface {
	Lookup(ctx context.Context, id string) (tools.Run, bool)
}

// Authenticator says which tenant a bearer token belongs to.
type Authenticator interface {
	Authenticate(token string) (tenant string, ok bool)
}

// SandboxLookup finds the conversation of a sandbox id (false when there
// is no such sandbox in the deployment).
type SandboxLookup func(ctx context.Context, id string) (Key, bool)

// PreviewLookup reads the sandbox a preview request is for (its token in
// the path, or its host name and cookie), without checking the link: the
// owner does. ok is false for a request that is not a preview's.
type PreviewLookup func(r *http.Request) (sandboxID string, ok bool)

// HostLookup reads the sandbox a request's host name belongs to (E2B's
// {port}-{id}.{domain}); ok is false for any other host.
type HostLookup func(r *http.Request) (sandboxID string, ok bool)

// Router is the front of the API on a replica: a request for a
// conversation is served here when this replica owns it (or takes it
// over), forwarded to its owner otherwise, and given 503 with
// Retry-After while it changes hands. A space's questions are gathered
// from every replica and an answer is tried at the peers when the question
// is not here (questions.go). Requests that belong to no conversation
// (listings, health, metrics, the console) are served here. Which is which
// is each route's scope in the API's route table (api.Routes). A request
// forwarded by a peer is checked and never forwarded again.
type Router struct {
	owners    *Owners
	fwd       *Forwarder
	signer    *Signer
	runs      RunLookup
	sandboxes SandboxLookup
	previews  PreviewLookup
	hosts     HostLookup
	auth      Authenticator
	next      http.Handler
	maxBody   int64
	metrics   *Metrics
	log       *slog.Logger
	mux       *http.ServeMux
}

// RouterOptions are a Router's parts.
type RouterOptions struct {
	Owners    *Owners
	Forwarder *Forwarder
	Signer    *Signer
	Runs      RunLookup
	Sandboxes SandboxLookup
	// Previews finds a preview request's sandbox; nil: preview requests
	// are served where they arrive.
	Previews PreviewLookup
	// Hosts finds the sandbox of a request that names it whatever its
	// path: one to a sandbox's own host name, an E2B signed file URL;
	// nil: such requests are routed by their path.
	Hosts HostLookup
	Auth  Authenticator
	// MaxBody caps the bodies read to find a conversation (create calls).
	MaxBody int64
	Metrics *Metrics
	Log     *slog.Logger
}

// NewRouter returns the front of next.
func NewRouter(next http.Handler, o RouterOptions) *Router {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	rt := &Router{owners: o.Owners, fwd: o.Forwarder, signer: o.Signer, runs: o.Runs, sandboxes: o.Sandboxes,
		previews: o.Previews, hosts: o.Hosts, auth: o.Auth, next: next, maxBody: o.MaxBody, metrics: o.Metrics, log: o.Log}
	mux, err := rt.routeMux(api.Routes())
	if err != nil {
		// Only a bug in the route table gets here, and its test fails
		// first; like a mux given a bad pattern, the router refuses to be.
		panic(err)
	}
	rt.mux = mux
	return rt
}

// routeMux routes each of routes as its scope says. A route whose scope
// the router does not know, or whose path lacks what its scope finds the
// conversation by, is an error: the router would serve it on the wrong
// replica.
func (rt *Router) routeMux(routes []api.Route) (*http.ServeMux, error) {
	byScope := map[api.Scope]struct {
		serve http.HandlerFunc
		param string // the path wildcard the scope reads
	}{
		api.ScopeNone:          {rt.next.ServeHTTP, ""},
		api.ScopeRun:           {rt.byRun, "id"},
		api.ScopeSandbox:       {rt.bySandbox, "id"},
		api.ScopeBody:          {rt.byBody, ""},
		api.ScopeSpace:         {rt.listQuestions, "space"},
		api.ScopeQuestion:      {rt.answerQuestion, "id"},
		api.ScopePreview:       {rt.byPreview, "token"},
		api.ScopeSandboxHeader: {rt.bySandboxHeader, ""},
		api.ScopeReplicas:      {rt.listAudit, ""},
	}
	mux := http.NewServeMux()
	catchAll := false
	for _, r := range routes {
		s, ok := byScope[r.Scope]
		if !ok {
			return nil, fmt.Errorf("route %q (%s) has %s, which the router cannot route: give it a scope in the route table (api/routes.go) and, for a new scope, a handler here", r.Pattern(), r.ID, r.Scope)
		}
		if s.param != "" && !strings.Contains(r.Path, "{"+s.param+"}") {
			return nil, fmt.Errorf("route %q (%s) is routed %s but its path has no {%s}", r.Pattern(), r.ID, r.Scope, s.param)
		}
		mux.HandleFunc(r.Pattern(), s.serve)
		catchAll = catchAll || r.Pattern() == "/"
	}
	if !catchAll {
		mux.Handle("/", rt.next) // the API writes its own 404
	}
	return mux, nil
}

type forwardedKey struct{}

// IsForwarded reports whether r came from a peer (checked).
func IsForwarded(r *http.Request) bool {
	v, _ := r.Context().Value(forwardedKey{}).(bool)
	return v
}

func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	forwarded, err := rt.signer.Verify(r)
	if err != nil {
		rt.metrics.forward("refused")
		rt.log.Warn("a forwarded request was refused", "from", r.RemoteAddr, "by", r.Header.Get(HeaderForwardedBy), "err", err)
		writeError(w, http.StatusForbidden, "permission_denied", "this request claims to be forwarded by a sandboxd replica, but the claim is "+
			strings.TrimPrefix(err.Error(), errForged.Error())+"; send requests without the X-Sandboxd-Forward headers")
		return
	}
	if forwarded {
		r = r.WithContext(context.WithValue(r.Context(), forwardedKey{}, true))
	}
	if rt.previews != nil {
		// A host-based preview's every path is the app's: it is routed
		// by its link before any route matches.
		if id, ok := rt.previews(r); ok {
			rt.bySandboxID(w, r, id)
			return
		}
	}
	if rt.hosts != nil {
		// So is a request to a sandbox's own host name.
		if id, ok := rt.hosts(r); ok {
			rt.bySandboxID(w, r, id)
			return
		}
	}
	rt.mux.ServeHTTP(w, r)
}

// serve routes a request for conversation k.
func (rt *Router) serve(w http.ResponseWriter, r *http.Request, k Key) {
	forwarded := IsForwarded(r)
	route, err := rt.owners.Resolve(r.Context(), k, true)
	if err != nil {
		WriteUnavailable(w, RetryAfter(err), err.Error())
		return
	}
	if route.Local {
		defer route.Done()
		rt.next.ServeHTTP(w, r)
		return
	}
	if forwarded {
		// The sender thought we own it; we think it is the peer's. One
		// of the two has a stale view: the client retries and by then the
		// lease says.
		WriteUnavailable(w, RetryAfter(nil), "conversation "+k.String()+" is changing hands between replicas; retry")
		return
	}
	rt.fwd.Forward(w, r, route.Peer, func() bool { return rt.owners.HeldBy(k, route.Peer.Identity) })
}

func (rt *Router) byRun(w http.ResponseWriter, r *http.Request) {
	run, ok := rt.runs.Lookup(r.Context(), r.PathValue("id"))
	if !ok {
		rt.next.ServeHTTP(w, r) // the API writes its 404
		return
	}
	rt.serve(w, r, Key{Tenant: run.Tenant, Conversation: run.Conversation})
}

func (rt *Router) bySandbox(w http.ResponseWriter, r *http.Request) {
	rt.bySandboxID(w, r, r.PathValue("id"))
}

// bySandboxHeader routes a request by the sandbox its api.SandboxHeader
// names; without one it is served here, where the API says what is missing.
func (rt *Router) bySandboxHeader(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(api.SandboxHeader)
	if id == "" {
		rt.next.ServeHTTP(w, r)
		return
	}
	rt.bySandboxID(w, r, id)
}

// byPreview routes a path-based preview by the sandbox its token names.
func (rt *Router) byPreview(w http.ResponseWriter, r *http.Request) {
	if rt.previews == nil {
		rt.next.ServeHTTP(w, r)
		return
	}
	id, ok := rt.previews(r)
	if !ok {
		rt.next.ServeHTTP(w, r) // the API says what is wrong with the link
		return
	}
	rt.bySandboxID(w, r, id)
}

func (rt *Router) bySandboxID(w http.ResponseWriter, r *http.Request, id string) {
	k, ok := rt.sandboxes(r.Context(), id)
	if !ok {
		rt.next.ServeHTTP(w, r)
		return
	}
	rt.serve(w, r, k)
}

// byBody routes the create calls, whose conversation is in the JSON body:
// the body is read (within the cap), looked into, and handed on whole.
// Whatever cannot be routed (no token, a body too large or not JSON, no
// conversation) is served here, where the API says what is wrong.
func (rt *Router) byBody(w http.ResponseWriter, r *http.Request) {
	tenant, ok := rt.tenant(r)
	if !ok {
		rt.next.ServeHTTP(w, r)
		return
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, rt.maxBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil || int64(len(head)) > rt.maxBody {
		rt.next.ServeHTTP(w, r)
		return
	}
	var body struct {
		Conversation string `json:"conversation"`
	}
	if json.Unmarshal(head, &body) != nil || body.Conversation == "" {
		rt.next.ServeHTTP(w, r)
		return
	}
	r.ContentLength = int64(len(head))
	rt.serve(w, r, Key{Tenant: tenant, Conversation: body.Conversation})
}

func (rt *Router) tenant(r *http.Request) (string, bool) {
	tok, ok := api.BearerToken(r)
	if !ok {
		return "", false
	}
	return rt.auth.Authenticate(tok)
}
