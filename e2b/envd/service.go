package envd

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Version is the envd version sandboxd reports: the SDK turns features on
// by it. At 0.6.4 it uploads streams as octet-stream, closes stdin, sends
// file metadata (0.6.2), asks for entries in watch events (0.6.3) and lets
// a watch of a network mount start (0.6.4).
const Version = "0.6.4"

// Sandboxes is what the service needs of the sandbox manager.
type Sandboxes interface {
	Get(ctx context.Context, tenant, id string) (sandbox.Info, error)
	// AgentOf is the sandbox's agent pipe; a paused sandbox is resumed
	// first.
	AgentOf(ctx context.Context, info sandbox.Info) (*agent.Client, sandbox.Info, error)
}

var _ Sandboxes = (*sandbox.Manager)(nil)

// Options configure a Service.
type Options struct {
	Sandboxes Sandboxes
	MaxLive   int   // processes running at once per sandbox (0: the agent's default)
	RingBytes int64 // output kept per process (0: the agent's default)
	// MaxFileBytes caps one file read or written through /files (0: 32 MiB).
	MaxFileBytes int64
	// DefaultUser is the account a request that names none acts as (""
	// is E2B's DefaultUser); a sandbox without it runs them as root.
	DefaultUser string
	// Passwd is where a sandbox's accounts are read ("" is /etc/passwd).
	Passwd string
	Log    *slog.Logger
}

// Service serves the in-sandbox API of every sandbox.
type Service struct {
	o Options

	mu       sync.Mutex
	kills    map[string]*time.Timer   // sandbox/process -> its timeout's kill
	watchers map[string]*watcher      // watcher id -> watcher
	accounts map[string]cachedAccount // sandbox id NUL account name -> its entry
	closed   bool
}

// New returns the service.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 32 << 20
	}
	if o.DefaultUser == "" {
		o.DefaultUser = DefaultUser
	}
	if o.Passwd == "" {
		o.Passwd = "/etc/passwd"
	}
	return &Service{o: o, kills: map[string]*time.Timer{}, watchers: map[string]*watcher{}, accounts: map[string]cachedAccount{}}
}

// Close stops the pending timeout kills and the polling watchers.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	kills, ws := s.kills, s.watchers
	s.kills, s.watchers = map[string]*time.Timer{}, map[string]*watcher{}
	s.mu.Unlock()
	for _, t := range kills {
		t.Stop()
	}
	for _, w := range ws {
		w.stop()
	}
	return nil
}

// target is the sandbox a request is for, with its pipe, and the account
// the request acts as.
type target struct {
	tenant string
	info   sandbox.Info
	c      *agent.Client
	acct   account
}

// conn looks the tenant's sandbox up and opens its pipe.
func (s *Service) conn(ctx context.Context, tenant, id string) (sandbox.Info, *agent.Client, error) {
	info, err := s.o.Sandboxes.Get(ctx, tenant, id)
	if err == nil && info.Tenant != tenant {
		err = errdefs.NotFound("no sandbox %s", id)
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return sandbox.Info{}, nil, gone(id)
		}
		return sandbox.Info{}, nil, err
	}
	c, info, err := s.o.Sandboxes.AgentOf(ctx, info)
	if errors.Is(err, errdefs.ErrNotFound) {
		err = gone(id)
	}
	return info, c, err
}

// errGone is a sandbox that no longer exists. E2B's proxy answers it 502,
// which the SDK reports as the sandbox's timeout.
type errGone struct{ id string }

func (e errGone) Error() string {
	return "sandbox " + e.id + " is not running: it was killed or its timeout ended; create a new one"
}

func gone(id string) error { return errGone{id} }

// ServeSandbox serves one request of the in-sandbox API; r.URL.Path is the
// path inside the sandbox ("/files", "/process.Process/Start").
func (s *Service) ServeSandbox(w http.ResponseWriter, r *http.Request, tenant, sandboxID string) {
	p := r.URL.Path
	if p == "/health" {
		s.health(w, r, tenant, sandboxID)
		return
	}
	service, method, isRPC := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	isRPC = isRPC && (service == "process.Process" || service == "filesystem.Filesystem")
	if !isRPC && p != "/files" {
		writeHTTPError(w, http.StatusNotFound, "there is no endpoint "+r.Method+" "+p+" in the sandbox; sandboxd serves /files, /health, process.Process and filesystem.Filesystem")
		return
	}
	if isRPC && r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, "Connect calls are POST requests")
		return
	}
	info, c, err := s.conn(r.Context(), tenant, sandboxID)
	if err != nil {
		var g errGone
		switch {
		case errors.As(err, &g) && isRPC:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			writeJSONBody(w, rpcErr(codeUnavailable, "%s", err.Error()))
		case errors.As(err, &g):
			writeHTTPError(w, http.StatusBadGateway, err.Error())
		case isRPC && streaming(service, method):
			streamFail(w, err)
		case isRPC:
			writeUnaryError(w, err)
		default:
			writeHTTPError(w, statusOf(err), err.Error())
		}
		return
	}
	t := target{tenant: tenant, info: info, c: c}
	if t.acct, err = s.accountFor(r.Context(), t, requestUser(r)); err != nil {
		switch {
		case isRPC && streaming(service, method):
			streamFail(w, err)
		case isRPC:
			writeUnaryError(w, err)
		default:
			writeHTTPError(w, http.StatusUnauthorized, err.Error())
		}
		return
	}
	switch {
	case service == "process.Process" && isRPC:
		s.serveProcess(w, r, t, method)
	case isRPC:
		s.serveFilesystem(w, r, t, method)
	default:
		s.serveFiles(w, r, t)
	}
}

// health answers 204 for a running sandbox and 502 for one that is not, as
// E2B does (the SDK's isRunning); it does not resume a paused sandbox.
func (s *Service) health(w http.ResponseWriter, r *http.Request, tenant, id string) {
	info, err := s.o.Sandboxes.Get(r.Context(), tenant, id)
	switch {
	case err == nil && info.Tenant == tenant && info.State == sandbox.StateRunning:
		w.WriteHeader(http.StatusNoContent)
	case err == nil && info.Tenant == tenant:
		writeHTTPError(w, http.StatusBadGateway, "sandbox "+id+" is "+info.State+", not running; connect to it to resume it")
	case err == nil || errors.Is(err, errdefs.ErrNotFound):
		writeHTTPError(w, http.StatusBadGateway, gone(id).Error())
	default:
		writeHTTPError(w, statusOf(err), err.Error())
	}
}

// killAt kills process id of the sandbox after d, whoever listens then.
func (s *Service) killAt(tenant, sandboxID, id string, d time.Duration) {
	key := sandboxID + "/" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if old := s.kills[key]; old != nil {
		old.Stop()
	}
	s.kills[key] = time.AfterFunc(d, func() {
		s.mu.Lock()
		delete(s.kills, key)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, c, err := s.conn(ctx, tenant, sandboxID)
		if err == nil {
			_, err = c.ProcKill(ctx, id)
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.o.Log.Warn("e2b: killing a command at its timeout failed", "sandbox", sandboxID, "process", id, "err", err)
		}
	})
}

// stopKill drops the timeout kill of a process that ended.
func (s *Service) stopKill(sandboxID, id string) {
	key := sandboxID + "/" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.kills[key]; t != nil {
		t.Stop()
		delete(s.kills, key)
	}
}
