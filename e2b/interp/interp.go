// Package interp serves E2B's code interpreter API — the one the npm
// package @e2b/code-interpreter calls on a sandbox's port 49999: POST
// /execute (a cell, answered as a stream of JSON lines), and the contexts
// (POST and GET /contexts, DELETE /contexts/{id}, POST
// /contexts/{id}/restart) — onto the eval tool's kernels in the sandbox.
//
// The default context of each language (id "python", "javascript") is the
// sandbox conversation's own kernel, the one the eval tool runs for that
// conversation; every context made with POST /contexts is a kernel of its
// own in the sandbox, at most 16 per sandbox unless WithMaxContexts says
// otherwise. The kernels live as eval's do: in the sandbox, owned by its
// agent, so they outlive a dropped pipe and a sandboxd restart; a
// context's id and folder are labels on its kernel process, which is how
// a restarted sandboxd finds it again.
//
// Server does not authenticate: the E2B front does, and hands it the
// tenant and sandbox id of each request, calling ServeSandbox(w, r,
// tenant, sandboxID) with r.URL.Path the path inside the sandbox
// ("/execute", "/contexts", ...). main wires it once the tool families
// have registered (eval's tool exists only then), keeping the family that
// eval.Family() returned in its list:
//
//	ci := interp.New(mgr, eval.ToolOf(evalFamily), interp.WithLogger(log))
//
// with mgr the *sandbox.Manager, and gives ci to the front as the
// PortHandler of port interp.Port (49999). eval.ToolOf is nil when eval
// is off; every call is then answered 503 saying so.
package interp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/e2b/envd"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// Port is the sandbox port the code interpreter SDK calls.
const Port = 49999

// Sandboxes is what the server needs of the sandbox manager.
type Sandboxes interface {
	Get(ctx context.Context, tenant, id string) (sandbox.Info, error)
	AgentOf(ctx context.Context, info sandbox.Info) (*agent.Client, sandbox.Info, error)
}

// Kernels is what the server needs of the eval tool (*eval.Tool).
type Kernels interface {
	RunCell(ctx context.Context, tg eval.Target, lang, code string, env map[string]string, budget time.Duration, emit func(eval.CellOutput)) (eval.CellEnd, error)
	StartKernel(ctx context.Context, tg eval.Target, lang string) error
	RestartKernel(ctx context.Context, tg eval.Target, lang string) error
	StopKernel(ctx context.Context, tg eval.Target, lang string) error
	ContextKernels(ctx context.Context, c *agent.Client) ([]eval.ContextKernel, error)
}

// Server answers the code interpreter API of every sandbox.
type Server struct {
	sbx     Sandboxes
	kernels Kernels // nil when eval is off
	cfg     config
	log     *slog.Logger
	reg     *registry
}

type config struct {
	maxContexts  int
	maxBody      int64
	budget       time.Duration
	writeTimeout time.Duration
	keepalive    time.Duration
	opTimeout    time.Duration
	user         string // the E2B account (WithUser)
}

// Option configures a Server.
type Option func(*Server)

// WithMaxContexts caps the contexts made with POST /contexts per sandbox
// (16; n under 1 keeps it); the default contexts do not count.
func WithMaxContexts(n int) Option {
	return func(s *Server) {
		if n >= 1 {
			s.cfg.maxContexts = n
		}
	}
}

// WithBudget caps how long one cell may run (0: the eval tool's largest
// budget). The SDK's timeoutMs ends a cell sooner: it closes the stream,
// which interrupts the cell.
func WithBudget(d time.Duration) Option { return func(s *Server) { s.cfg.budget = d } }

// WithUser names the E2B account whose home the default contexts start in
// ("" is E2B's "user"), as E2B's code interpreter runs in /home/user, so
// that a cell's relative paths are the files API's (package e2b/envd).
func WithUser(name string) Option { return func(s *Server) { s.cfg.user = name } }

// WithLogger logs what goes wrong beside the answers.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns the server. kernels is the eval tool (nil when eval is off:
// every call is answered with why).
func New(sbx Sandboxes, kernels Kernels, opts ...Option) *Server {
	if t, ok := kernels.(*eval.Tool); ok && t == nil {
		kernels = nil
	}
	s := &Server{sbx: sbx, kernels: kernels, log: slog.Default(),
		cfg: config{maxContexts: 16, maxBody: 16 << 20, writeTimeout: 30 * time.Second, keepalive: 2 * time.Second, opTimeout: time.Minute}}
	for _, o := range opts {
		o(s)
	}
	if s.cfg.user == "" {
		s.cfg.user = envd.DefaultUser
	}
	s.reg = newRegistry(maxTrackedSandboxes)
	return s
}

// ServeSandbox answers one request to the code interpreter of the tenant's
// sandbox sandboxID; r.URL.Path is the path inside the sandbox.
func (s *Server) ServeSandbox(w http.ResponseWriter, r *http.Request, tenant, sandboxID string) {
	p := r.URL.Path
	switch {
	case p == "/health":
		if !allow(w, r, http.MethodGet) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `"OK"`)
		return
	case p == "/execute":
		if allow(w, r, http.MethodPost) {
			s.withSandbox(w, r, tenant, sandboxID, s.execute)
		}
		return
	case p == "/contexts":
		switch r.Method {
		case http.MethodGet:
			s.withSandbox(w, r, tenant, sandboxID, s.listContexts)
		case http.MethodPost:
			s.withSandbox(w, r, tenant, sandboxID, s.createContext)
		default:
			allow(w, r, http.MethodGet, http.MethodPost)
		}
		return
	case strings.HasPrefix(p, "/contexts/"):
		rest := strings.TrimPrefix(p, "/contexts/")
		if id, ok := strings.CutSuffix(rest, "/restart"); ok && id != "" && !strings.Contains(id, "/") {
			if allow(w, r, http.MethodPost) {
				s.withSandbox(w, r, tenant, sandboxID, func(w http.ResponseWriter, r *http.Request, sb *box) { s.restartContext(w, r, sb, id) })
			}
			return
		}
		if rest != "" && !strings.Contains(rest, "/") {
			if allow(w, r, http.MethodDelete) {
				s.withSandbox(w, r, tenant, sandboxID, func(w http.ResponseWriter, r *http.Request, sb *box) { s.deleteContext(w, r, sb, rest) })
			}
			return
		}
	}
	http.Error(w, fmt.Sprintf("the code interpreter has no %s %s; it serves POST /execute, GET and POST /contexts, DELETE /contexts/{id}, POST /contexts/{id}/restart and GET /health", r.Method, p), http.StatusNotFound)
}

func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	http.Error(w, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, strings.Join(methods, " or "), r.Method), http.StatusMethodNotAllowed)
	return false
}

// box is one request's sandbox: its record and its agent.
type box struct {
	tenant string
	info   sandbox.Info
	agent  *agent.Client
	// dir is where a default context's kernel starts (defaultDir).
	dir string
}

// withSandbox finds the sandbox and its agent, then runs h.
func (s *Server) withSandbox(w http.ResponseWriter, r *http.Request, tenant, id string, h func(http.ResponseWriter, *http.Request, *box)) {
	if s.kernels == nil {
		http.Error(w, "the code interpreter is off: it runs on sandboxd's eval kernels, and eval is off in this sandboxd's config (eval.disabled: true); only an operator can turn it on", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.opTimeout)
	defer cancel()
	info, err := s.sbx.Get(ctx, tenant, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	c, info, err := s.sbx.AgentOf(ctx, info)
	if err != nil {
		s.fail(w, err)
		return
	}
	sb := &box{tenant: tenant, info: info, agent: c}
	sb.dir = s.defaultDir(ctx, sb)
	h(w, r, sb)
}

// target is the kernel of a context: the conversation's own for a default
// context, one of its own otherwise.
func (sb *box) target(c ctxRecord) eval.Target {
	tg := eval.Target{Agent: sb.agent, SandboxID: sb.info.ID, Tenant: sb.tenant, Conversation: sb.info.Conversation, Dir: c.cwd}
	if !c.isDefault() {
		tg.Context = c.id
	}
	return tg
}

// fail answers an error that came before any output, with the status the
// SDK turns into its error classes (404 NotFoundError, 502 TimeoutError,
// others SandboxError) and the sentence as the body.
func (s *Server) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		status = http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict), errors.Is(err, errdefs.ErrFailedPrecondition):
		status = http.StatusConflict
	case errors.Is(err, errdefs.ErrResourceExhausted):
		status = http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrUnauthenticated):
		status = http.StatusUnauthorized
	case errors.Is(err, errdefs.ErrUnavailable), errors.Is(err, errdefs.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		// The SDK reads 502 as the sandbox not answering (TimeoutError).
		status = http.StatusBadGateway
	}
	if status == http.StatusInternalServerError {
		s.log.Warn("code interpreter call failed", "err", err)
	}
	http.Error(w, err.Error(), status)
}

// decode reads a JSON body of at most maxBody bytes into v.
func (s *Server) decode(r *http.Request, v any, what string) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.maxBody+1))
	if err != nil {
		return errdefs.InvalidArgument("the %s body could not be read: %v", what, err)
	}
	if int64(len(body)) > s.cfg.maxBody {
		return errdefs.InvalidArgument("the %s body is over %d bytes; send less code per call", what, s.cfg.maxBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errdefs.InvalidArgument("the %s body is not valid JSON of the expected shape: %v", what, err)
	}
	return nil
}

// registry keeps the contexts made through this server, per sandbox, for
// listing them and telling their language and folder; a sandbox's record
// is rebuilt from its kernels' labels when it is not held (after a
// restart, or once evicted). It holds at most max sandboxes.
type registry struct {
	max int

	mu    sync.Mutex // guards boxes and clock
	boxes map[string]*boxContexts
	clock uint64
}

// maxTrackedSandboxes bounds the registry; the least recently used
// sandbox's record is dropped first.
const maxTrackedSandboxes = 4096

type boxContexts struct {
	used uint64 // guarded by registry.mu

	// mu guards ctxs, loaded and dir, and serializes changes to one sandbox's
	// contexts (create, delete).
	mu     sync.Mutex
	ctxs   map[string]ctxRecord
	loaded bool
	dir    string // defaultDir's answer, once found
}

func newRegistry(max int) *registry { return &registry{max: max, boxes: map[string]*boxContexts{}} }

// of returns the sandbox's record, a new empty one when not held.
func (g *registry) of(key string) *boxContexts {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clock++
	if b := g.boxes[key]; b != nil {
		b.used = g.clock
		return b
	}
	if len(g.boxes) >= g.max {
		var oldest string
		for k, b := range g.boxes {
			if oldest == "" || b.used < g.boxes[oldest].used {
				oldest = k
			}
		}
		delete(g.boxes, oldest)
	}
	b := &boxContexts{ctxs: map[string]ctxRecord{}, used: g.clock}
	g.boxes[key] = b
	return b
}
