// Package api is sandboxd's HTTP API v1 (DESIGN.md §3): handlers, tenant
// authentication, and the JSON types shared with the Go client in
// api/client. The runs it serves are kept by package runstore.
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// Sandboxes is what the API needs of the sandbox manager. Each method is
// scoped to a tenant; the API checks the tenant again on what it returns.
type Sandboxes interface {
	Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error)
	Get(ctx context.Context, tenant, id string) (sandbox.Info, error)
	List(ctx context.Context, tenant, conversation string) ([]sandbox.Info, error)
	// Lookup finds the conversation's sandbox (NotFound when it has none)
	// and never creates one.
	Lookup(ctx context.Context, tenant, conversation string) (sandbox.Info, error)
	Delete(ctx context.Context, tenant, id string) error
	Agent(ctx context.Context, tenant, conversation string) (*agent.Client, sandbox.Info, error)
}

// agentOf is an optional capability of Sandboxes: the pipe of a sandbox
// already looked up, taken by its id, so a call looks its sandbox up once.
type agentOf interface {
	AgentOf(ctx context.Context, info sandbox.Info) (*agent.Client, sandbox.Info, error)
}

var _ agentOf = (*sandbox.Manager)(nil)

// Runs keeps the live runs (runstore.Store). Each method runs on the
// request's context, which bounds what it asks of run records kept
// elsewhere (replicas).
type Runs interface {
	// Create stores run under a new id and returns it.
	Create(ctx context.Context, run tools.Run) (tools.Run, error)
	// Get returns the tenant's live run (NotFound for any other) and marks
	// it used.
	Get(ctx context.Context, tenant, id string) (tools.Run, error)
	// List returns the tenant's live runs, sorted by id.
	List(ctx context.Context, tenant string) []tools.Run
	// Delete ends the tenant's run and the runs it spawned.
	Delete(ctx context.Context, tenant, id string) error
}

var _ Runs = (*runstore.Store)(nil)

// Tools is what the API needs of the tool registry.
type Tools interface {
	Visible(env *tools.Env) []tools.Spec
	// Unavailable lists the tools the run does not see, and why.
	Unavailable(env *tools.Env) []tools.Unavailable
	// Call runs a tool; a tool the run cannot see is errdefs.ErrNotFound.
	Call(ctx context.Context, env *tools.Env, name string, args json.RawMessage) (tools.Result, error)
}

// Pinger checks the sandbox engine for /readyz.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Observer receives request and run events (metrics implement it).
type Observer interface {
	// ObserveHTTP gets the mux pattern that matched (a closed set), or ""
	// when none did; never the raw path.
	ObserveHTTP(route, method string, code int, d time.Duration)
	RunCreated()
}

// Server is the HTTP API. It starts no goroutines of its own; the
// http.Server that serves it owns the request goroutines.
type Server struct {
	sandboxes   Sandboxes
	tools       Tools
	auth        Authenticator
	runs        Runs
	log         *slog.Logger
	obs         Observer
	pinger      Pinger
	readyNotes  func() []string // degradations /readyz names while ready
	gatherer    prometheus.Gatherer
	hostPaths   HostPaths
	image       string
	maxBody     int64
	maxTool     int64
	bodyTimeout time.Duration
	envHooks    []EnvHook
	questions   Questions
	calls       Calls    // the call recorder (WithCalls); nil: GET /v1/runs/{id}/calls responds 503
	egress      Egress   // network mode "proxy" (WithEgress); nil: refused
	previews    Previews // preview links (WithPreviews); nil: 503, and the port proxy uses ownProxy
	audit       Audit    // the audit record (WithAudit); nil: nothing recorded, GET /v1/audit 503
	auditAll    string   // the tenant that sees every tenant's records (WithAuditAll)
	// lifecycleDefault is the tenant's default lifecycle (WithLifecycleDefaults); nil: none.
	lifecycleDefault func(tenant string) sandbox.Lifecycle
	// runtimePolicy is the tenant's runtime policy (WithRuntimePolicy); nil: runc, any allowed.
	runtimePolicy func(tenant string) RuntimePolicy
	procMax       int   // processes running at once per sandbox (WithProcesses; 0: the agent's default)
	procRing      int64 // output kept per process (WithProcesses; 0: the agent's default)
	knownSandboxes
	ownProxy     *ports.Proxy
	ownProxyOnce sync.Once // makes ownProxy
	runTokens    *RunTokens
	onBuilt      []func(http.Handler)
	mountBuild   func(*Server) http.Handler // WithE2B
	mountOwns    func(r *http.Request) bool // WithE2B: the requests the mount owns whatever their path
	mount        http.Handler               // built by mountBuild in New
	mcp          *mcp.Handler               // /v1/runs/{id}/mcp
	openAPI      http.Handler               // /v1/openapi.json, built once the mux is complete

	streamHeartbeat time.Duration // comment interval of a silent streamed call
	streamMax       int64         // live text one streamed call shows at most

	handler http.Handler
}

var _ http.Handler = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// EnvHook adds to the tools.Env of a tool call or tool listing before the
// registry sees it (for example diagnostics-on-write sets AfterWrite). Hooks
// run in the order given and must not block.
type EnvHook func(ctx context.Context, env *tools.Env)

// WithEnvHooks adds hooks that complete every tools.Env the server builds.
func WithEnvHooks(h ...EnvHook) Option {
	return func(s *Server) { s.envHooks = append(s.envHooks, h...) }
}

// WithHandlerHook calls f with the finished server at the end of New, for
// wiring that serves the API on connections of its own (the worker relay).
func WithHandlerHook(f func(http.Handler)) Option {
	return func(s *Server) { s.onBuilt = append(s.onBuilt, f) }
}

// WithLogger sets the request and error log.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRuns uses runs as the run store (default: runstore.New(), in memory).
func WithRuns(runs Runs) Option { return func(s *Server) { s.runs = runs } }

// WithObserver receives request and run events.
func WithObserver(o Observer) Option { return func(s *Server) { s.obs = o } }

// WithPinger makes /readyz check the engine.
func WithPinger(p Pinger) Option { return func(s *Server) { s.pinger = p } }

// WithGatherer serves g on /metrics (never the global registry by default).
func WithGatherer(g prometheus.Gatherer) Option { return func(s *Server) { s.gatherer = g } }

// WithHostPaths sets who may use which host directory as a workspace.
func WithHostPaths(h HostPaths) Option { return func(s *Server) { s.hostPaths = h } }

// WithDefaultImage sets the image of sandboxes that name none.
func WithDefaultImage(image string) Option { return func(s *Server) { s.image = image } }

// WithBodyLimits caps request bodies: control endpoints and tool calls.
// A value <= 0 keeps that default.
func WithBodyLimits(control, toolCall int64) Option {
	return func(s *Server) {
		if control > 0 {
			s.maxBody = control
		}
		if toolCall > 0 {
			s.maxTool = toolCall
		}
	}
}

// New returns the API over sandboxes and tools, with auth deciding tenants.
func New(sandboxes Sandboxes, tl Tools, auth Authenticator, opts ...Option) *Server {
	s := &Server{
		sandboxes:   sandboxes,
		tools:       tl,
		auth:        auth,
		log:         slog.New(slog.DiscardHandler),
		image:       config.DefaultImage,
		maxBody:     config.DefaultMaxBodyBytes,
		maxTool:     config.DefaultMaxToolBodyBytes,
		bodyTimeout: DefaultBodyTimeout,

		streamHeartbeat: DefaultStreamHeartbeat,
		streamMax:       DefaultStreamMaxBytes,
	}
	for _, o := range opts {
		o(s)
	}
	if s.runs == nil {
		s.runs = runstore.New()
	}
	s.mcp = s.newMCP()
	if s.mountBuild != nil {
		s.mount = s.mountBuild(s)
	}
	s.handler = s.middleware(s.routes())
	for _, f := range s.onBuilt {
		f(s)
	}
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes registers every endpoint of the route table (routes.go) this
// server serves.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range routeTable() {
		if h := rt.serve(s); h != nil {
			mux.Handle(rt.public().Pattern(), auditRoute(rt.public().Pattern(), h))
		}
	}
	s.openAPI = openAPIHandler(mux)
	return mux
}

// auditRoute tells the request's audit record its route before the
// handler runs, so the tool calls it makes name it.
func auditRoute(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		audit.RequestFrom(r.Context()).SetRoute(pattern)
		h.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Status{Status: "ok"})
}

// readyzTimeout bounds the engine ping, so a hung engine makes /readyz say
// "not ready" rather than hanging the probe.
const readyzTimeout = 2 * time.Second

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.pinger != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
		defer cancel()
		if err := s.pinger.Ping(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: ErrorDetail{
				Code: "unavailable", Message: "the sandbox engine does not answer: " + err.Error() + "; sandboxd is not ready until it does",
			}})
			return
		}
	}
	s.writeReady(w)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, ErrorBody{Error: ErrorDetail{
		Code:    "not_found",
		Message: "there is no endpoint " + r.Method + " " + r.URL.Path + "; check the method and path against the API v1 documentation",
	}})
}
