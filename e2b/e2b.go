// Package e2b serves the E2B API from sandboxd, so that E2B's own SDKs work
// against it unchanged: the control API (create, list, kill, timeout,
// pause, connect, snapshots, fork, network, metrics) under /e2b, and the
// in-sandbox API ("envd", package e2b/envd) under /e2b/sandbox, routed by
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers (or, with a domain, by
// the {port}-{id}.{domain} host name). An E2B sandbox is a sandboxd
// sandbox; its E2B id is its sandboxd id.
package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/e2b/envd"
	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// EnvdPort is the port the SDK names for the in-sandbox API.
const EnvdPort = 49983

// CodeInterpreterPort is the port @e2b/code-interpreter names; it is
// served by a PortHandler when one is configured, never by the sandbox.
const CodeInterpreterPort = 49999

// PortHandler serves a port of every sandbox from sandboxd itself (the
// code interpreter's 49999) rather than from the sandbox. r.URL.Path is the
// path inside the sandbox ("/execute"); tenant and sandboxID are checked.
type PortHandler interface {
	ServeSandbox(w http.ResponseWriter, r *http.Request, tenant, sandboxID string)
}

// Host is what the handler needs of sandboxd's API server (*api.Server):
// a create with the API's defaults and checks, the port proxy, the egress
// policy.
type Host interface {
	CreateSandbox(ctx context.Context, tenant string, req api.CreateSandboxRequest) (sandbox.Info, error)
	ServePort(w http.ResponseWriter, r *http.Request, tenant, id string, port int, o api.PortOptions) error
	Network(ctx context.Context, tenant, id string) (gateway.Status, error)
	SetNetwork(ctx context.Context, tenant, id string, p gateway.Policy) (gateway.Status, error)
}

var _ Host = (*api.Server)(nil)

// Sandboxes is what the handler needs of the sandbox manager.
type Sandboxes interface {
	envd.Sandboxes
	List(ctx context.Context, tenant, conversation string) ([]sandbox.Info, error)
	Delete(ctx context.Context, tenant, id string) error
	Pause(ctx context.Context, tenant, id string) (sandbox.Info, error)
	Hibernate(ctx context.Context, tenant, id string) (sandbox.Info, error)
	Resume(ctx context.Context, tenant, id string) (sandbox.Info, error)
	Stats(ctx context.Context, tenant, id string) (sandbox.Stats, error)
	Snapshot(ctx context.Context, tenant, id, name string) (sandbox.Snapshot, error)
	Snapshots(ctx context.Context, tenant string) ([]sandbox.Snapshot, error)
	GetSnapshot(ctx context.Context, tenant, snapID string) (sandbox.Snapshot, error)
	DeleteSnapshot(ctx context.Context, tenant, snapID string) error
	Fork(ctx context.Context, tenant, id string, conversations []string) (sandbox.Snapshot, []sandbox.Info, []sandbox.ForkFailure, error)
	// All is every tenant's sandboxes, for what names no tenant (a
	// signed file URL).
	All(ctx context.Context, notBefore time.Time) ([]sandbox.Info, error)
	SetExpiry(ctx context.Context, tenant, id string, e sandbox.Expiry) error
	// Find is sandbox id whoever's it is (a public port names no tenant).
	Find(ctx context.Context, id string) (sandbox.Info, error)
}

var _ Sandboxes = (*sandbox.Manager)(nil)

// Config configures the handler.
type Config struct {
	// Templates maps E2B template names to images.
	Templates map[string]string
	// Domain, when set, makes {port}-{id}.{domain} a sandbox's host names.
	Domain string
	// PublicPorts lets requests to a sandbox's ports through without its
	// access token, as E2B does by default.
	PublicPorts bool
	// Network is the network of a sandbox that asks for internet access
	// ("" is sandboxd's default for the tenant).
	Network string
	// User is the account requests into a sandbox act as when they name
	// none ("" is E2B's "user").
	User string
	// NoSudo makes the sandboxes without set-user-ID privileges
	// (sandbox.Spec.Setuid false): sudo from an account fails.
	NoSudo bool
	// DataDir keeps the access key (under e2b/), and once kept the
	// sandboxes' records (migrated from at start, store.go).
	DataDir string
	// Secret signs the access tokens; every replica must have the same
	// (the peer key), so that the owner of a sandbox after a failover
	// takes the tokens its first owner gave. nil: a key kept in DataDir.
	Secret    []byte
	Auth      api.Authenticator
	Host      Host
	Sandboxes Sandboxes
	// Hold, when set, makes this replica the owner of a new conversation
	// (a create's, a fork's copy's) until release is called, as a create
	// through sandboxd's own API is by the router; nil on a lone sandboxd.
	Hold func(ctx context.Context, tenant, conversation string) (release func(), err error)
	// Ports are served by sandboxd itself for every sandbox.
	Ports     map[int]PortHandler
	MaxLive   int
	RingBytes int64
	Log       *slog.Logger
}

// Handler serves the E2B API under /e2b.
type Handler struct {
	cfg  Config
	mux  *http.ServeMux
	envd *envd.Service
	sign signer
	log  *slog.Logger
	// legacy are the records of a sandboxd from before (store.go), read
	// once at start and never written.
	legacy map[string]record

	done chan struct{} // closed when the migration of legacy ended
}

// Prefix is where the handler serves.
const Prefix = "/e2b"

// New makes the handler and, when the data dir holds the records of a
// sandboxd from before, moves their timeouts onto the sandboxes (Close
// waits for it).
func New(cfg Config) (*Handler, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(cfg.DataDir, "e2b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	legacy, toMigrate, err := loadLegacy(dir)
	if err != nil {
		return nil, err
	}
	sg := newSigner(cfg.Secret)
	if cfg.Secret == nil {
		if sg, err = loadSigner(dir); err != nil {
			return nil, err
		}
	}
	h := &Handler{cfg: cfg, sign: sg, log: cfg.Log, legacy: legacy,
		envd: envd.New(envd.Options{Sandboxes: cfg.Sandboxes, MaxLive: cfg.MaxLive, RingBytes: cfg.RingBytes, DefaultUser: cfg.User, Log: cfg.Log}),
		done: make(chan struct{})}
	h.mux = h.routes()
	go func() {
		defer close(h.done)
		if toMigrate {
			h.migrate(dir)
		}
	}()
	return h, nil
}

// hold makes this replica the owner of the tenant's new conversations
// (Config.Hold); release ends the hold.
func (h *Handler) hold(ctx context.Context, tenant string, convs ...string) (release func(), err error) {
	var dones []func()
	release = func() {
		for _, d := range dones {
			d()
		}
	}
	if h.cfg.Hold == nil {
		return release, nil
	}
	for _, c := range convs {
		done, err := h.cfg.Hold(ctx, tenant, c)
		if err != nil {
			release()
			return nil, err
		}
		dones = append(dones, done)
	}
	return release, nil
}

// SetHost gives the handler the API server it creates sandboxes through
// (api.WithE2B's build, once the server exists).
func (h *Handler) SetHost(host Host) { h.cfg.Host = host }

// Close waits for the migration (bounded by its own deadline) and ends
// the in-sandbox API's timers.
func (h *Handler) Close() error {
	<-h.done
	return h.envd.Close()
}

func (h *Handler) routes() *http.ServeMux {
	m := http.NewServeMux()
	ctl := func(pattern string, f func(w http.ResponseWriter, r *http.Request, tenant string) error) {
		m.Handle(pattern, h.authed(f))
	}
	for _, p := range []string{"/sandboxes", "/v2/sandboxes"} {
		ctl("POST "+Prefix+p, h.create)
		ctl("GET "+Prefix+p, h.list)
		ctl("POST "+Prefix+p+"/{id}/connect", h.connect)
	}
	ctl("GET "+Prefix+"/sandboxes/{id}", h.get)
	ctl("DELETE "+Prefix+"/sandboxes/{id}", h.kill)
	ctl("POST "+Prefix+"/sandboxes/{id}/timeout", h.setTimeout)
	ctl("POST "+Prefix+"/sandboxes/{id}/pause", h.pause)
	ctl("POST "+Prefix+"/sandboxes/{id}/resume", h.resume)
	ctl("POST "+Prefix+"/sandboxes/{id}/snapshots", h.snapshot)
	ctl("POST "+Prefix+"/sandboxes/{id}/fork", h.fork)
	ctl("PUT "+Prefix+"/sandboxes/{id}/network", h.network)
	ctl("POST "+Prefix+"/sandboxes/{id}/network", h.network)
	ctl("GET "+Prefix+"/sandboxes/{id}/metrics", h.metrics)
	ctl("GET "+Prefix+"/snapshots", h.listSnapshots)
	ctl("DELETE "+Prefix+"/templates/{id}", h.deleteTemplate)
	ctl("GET "+Prefix+"/templates/aliases/{alias}", h.templateAlias)
	m.HandleFunc("GET "+Prefix+"/health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc(Prefix+"/sandbox/", h.front)
	m.HandleFunc(Prefix+"/sandbox", h.front)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "sandboxd does not serve "+r.Method+" "+r.URL.Path+" of the E2B API: templates are configured by the operator (e2b.templates), not built, and volumes, teams and API keys are sandboxd's own")
	})
	return m
}

// ServeHTTP serves the E2B API; a request to a sandbox's host name goes to
// the in-sandbox front whatever its path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if port, id, ok := h.hostTarget(r.Host); ok {
		h.serveSandbox(w, r, id, port, "", false)
		return
	}
	if isSignedFiles(r) {
		h.serveSignedFiles(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Owns reports whether r belongs to the handler whatever its path: a
// request to one of the sandboxes' host names ({port}-{id}.{domain}), or
// a signed file URL at the listener's root (signed.go); api.WithE2B asks
// it for every request.
func (h *Handler) Owns(r *http.Request) bool {
	_, _, ok := h.hostTarget(r.Host)
	return ok || isSignedFiles(r)
}

func (h *Handler) hostTarget(host string) (port int, id string, ok bool) {
	return HostSandbox(host, h.cfg.Domain)
}

// HostSandbox reads a sandbox's host name, {port}-{id}.{domain}: the port
// and the sandbox id; ok is false for any other host, and for every host
// when domain is "" (a replica's router routes by it too).
func HostSandbox(host, domain string) (port int, id string, ok bool) {
	if domain == "" {
		return 0, "", false
	}
	if hst, _, err := net.SplitHostPort(host); err == nil {
		host = hst
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return 0, "", false
	}
	ps, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(ps)
	if !ok || err != nil || port < 1 || port > 65535 || id == "" {
		return 0, "", false
	}
	return port, id, true
}

// errorBody is E2B's error shape: the HTTP status again, and a sentence.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// statusOf is the E2B status of an error of sandboxd's classes; the SDK
// raises by status (401 AuthenticationError, 429 RateLimitError, 404 on a
// sandbox SandboxNotFoundError, ...).
func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict), errors.Is(err, errdefs.ErrFailedPrecondition):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errdefs.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// apiKey is the request's API key: X-API-KEY, or a bearer token.
func apiKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-API-KEY")); k != "" {
		return k
	}
	tok, _ := api.BearerToken(r)
	return tok
}

// authed runs f for the tenant whose token the request carries.
func (h *Handler) authed(f func(w http.ResponseWriter, r *http.Request, tenant string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r)
		if key == "" {
			writeError(w, http.StatusUnauthorized, "no API key: send a sandboxd tenant token as X-API-KEY (E2B_API_KEY) or as Authorization: Bearer")
			return
		}
		tenant, ok := h.cfg.Auth.Authenticate(key)
		if !ok {
			writeError(w, http.StatusUnauthorized, "the API key is not a token sandboxd knows; use the whole token of a configured tenant (or the admin token in DATA_DIR/token)")
			return
		}
		api.SetRequestTenant(r.Context(), tenant)
		if err := f(w, r, tenant); err != nil {
			writeError(w, statusOf(err), err.Error())
		}
	})
}

// front serves /e2b/sandbox/...: the SDK's requests to E2B_SANDBOX_URL.
func (h *Handler) front(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("E2b-Sandbox-Id")
	ps := r.Header.Get("E2b-Sandbox-Port")
	if id == "" || ps == "" {
		writeError(w, http.StatusBadRequest, "a request to the sandbox URL needs the headers E2b-Sandbox-Id and E2b-Sandbox-Port naming the sandbox and its port")
		return
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "E2b-Sandbox-Port "+strconv.Quote(ps)+" is not a port from 1 to 65535")
		return
	}
	h.serveSandbox(w, r, id, port, Prefix+"/sandbox", true)
}

// serveSandbox checks the sandbox's access token and passes r to what
// serves port: envd, a port handler of sandboxd's own, or the sandbox's
// own port through the port proxy. prefix is taken off the path.
func (h *Handler) serveSandbox(w http.ResponseWriter, r *http.Request, id string, port int, prefix string, needToken bool) {
	tok := r.Header.Get("X-Access-Token")
	if tok == "" {
		tok = r.Header.Get("E2b-Traffic-Access-Token")
	}
	var tenant string
	if tok != "" {
		t, sid, ok := h.sign.verify(tok)
		if !ok || sid != id {
			writeError(w, http.StatusUnauthorized, "the access token is not sandbox "+id+"'s; use the envdAccessToken its create or connect answered")
			return
		}
		tenant = t
		api.SetRequestTenant(r.Context(), tenant)
	}
	inner := strings.TrimPrefix(r.URL.Path, prefix)
	if inner == "" {
		inner = "/"
	}
	if _, signed := signedOf(r); tenant == "" && signed && port == EnvdPort && inner == signedPath {
		// A signed file URL: its signature stands for the token.
		info, err := h.cfg.Sandboxes.Find(r.Context(), id)
		if err != nil {
			writeError(w, http.StatusBadGateway, "sandbox "+id+" is not running: it was killed or its timeout ended")
			return
		}
		if status, msg, ok := h.checkSigned(r, info.Tenant, id); !ok {
			writeError(w, status, msg)
			return
		}
		tenant = info.Tenant
		api.SetRequestTenant(r.Context(), tenant)
		r.URL.RawQuery = signedQuery(r.URL.Query())
	}
	if tenant == "" {
		if needToken || port == EnvdPort || h.cfg.Ports[port] != nil {
			writeError(w, http.StatusUnauthorized, "a request to sandbox "+id+" needs its access token in X-Access-Token (or E2b-Traffic-Access-Token): the envdAccessToken its create or connect answered")
			return
		}
		// A port of the sandbox's own: the sandbox says whose it is, and
		// whether its ports are public (network.allowPublicTraffic).
		info, err := h.cfg.Sandboxes.Find(r.Context(), id)
		if err != nil {
			writeError(w, http.StatusBadGateway, "sandbox "+id+" is not running: it was killed or its timeout ended")
			return
		}
		public := h.cfg.PublicPorts
		if p := h.recordOf(info).Public; p != nil {
			public = *p
		}
		if !public {
			// E2B's answer to traffic without its token.
			writeError(w, http.StatusForbidden, "a request to port "+strconv.Itoa(port)+" of sandbox "+id+" needs its traffic access token in E2b-Traffic-Access-Token (the trafficAccessToken its create answered): its ports are not public")
			return
		}
		tenant = info.Tenant
	}
	r.Header.Del("X-Access-Token")
	r.Header.Del("E2b-Traffic-Access-Token")
	switch {
	case port == EnvdPort:
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = inner, ""
		h.envd.ServeSandbox(w, r2, tenant, id)
	case h.cfg.Ports[port] != nil:
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = inner, ""
		if _, err := h.cfg.Sandboxes.Get(r.Context(), tenant, id); err != nil {
			writeError(w, http.StatusBadGateway, "sandbox "+id+" is not running: it was killed or its timeout ended")
			return
		}
		h.cfg.Ports[port].ServeSandbox(w, r2, tenant, id)
	case port == CodeInterpreterPort:
		writeError(w, http.StatusBadGateway, "the code interpreter (port 49999) is not served by this sandboxd; use commands.run, or ask the operator for a sandboxd that serves @e2b/code-interpreter")
	default:
		fail := func(w http.ResponseWriter, status int, _, msg string) { writeError(w, status, msg) }
		mask := func(info sandbox.Info) string {
			return strings.ReplaceAll(h.recordOf(info).MaskHost, "${PORT}", strconv.Itoa(port))
		}
		if err := h.cfg.Host.ServePort(w, r, tenant, id, port, api.PortOptions{Prefix: prefix, Host: mask, Fail: fail}); err != nil {
			status := statusOf(err)
			if status == http.StatusNotFound {
				status = http.StatusBadGateway
			}
			writeError(w, status, err.Error())
		}
	}
}
