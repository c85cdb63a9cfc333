package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/runstore"
)

type ctxKey int

const reqInfoKey ctxKey = 0

// reqInfo is per-request state that handlers fill in for the log line.
type reqInfo struct {
	id   string
	base string // scheme://host the caller used to reach sandboxd

	mu     sync.Mutex // guards tenant and code: set by the handler, read by the logger
	tenant string
	code   string // the error class the request was answered with
}

func requestID(ctx context.Context) string {
	if ri, _ := ctx.Value(reqInfoKey).(*reqInfo); ri != nil {
		return ri.id
	}
	return ""
}

func tenantOf(ctx context.Context) string {
	if ri, _ := ctx.Value(reqInfoKey).(*reqInfo); ri != nil {
		ri.mu.Lock()
		defer ri.mu.Unlock()
		return ri.tenant
	}
	return ""
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and deadlines (SSE).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// middleware adds a request id, recovers panics as 500 JSON, and logs and
// counts every request. Tokens are never logged: only the tenant is.
func (s *Server) middleware(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: incomingRequestID(r.Header.Get(HeaderRequestID)), base: baseURL(r)}
		r = r.WithContext(context.WithValue(r.Context(), reqInfoKey, ri))
		w.Header().Set(HeaderRequestID, ri.id)
		sw := &statusWriter{ResponseWriter: w}
		r, ar, hb := s.auditStart(r, ri.id)
		route := ""

		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "request_id", ri.id, "method", r.Method, "path", r.URL.Path,
					"panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, r, s.log, errdefs.Internal("sandboxd failed while answering this request (request id %s); the error is logged, retry or report it", ri.id))
				}
			}
			d := time.Since(start)
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			// r.Pattern is set by the mux on this same request value.
			if s.obs != nil {
				s.obs.ObserveHTTP(r.Pattern, r.Method, status, d)
			}
			if route == "" {
				route = r.Pattern
			}
			ri.mu.Lock()
			code := ri.code
			ri.mu.Unlock()
			s.auditEnd(r, ar, hb, route, start, status, code, d)
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelError
			case r.Pattern == "GET /healthz" || r.Pattern == "GET /readyz" || r.Pattern == "GET /metrics":
				level = slog.LevelDebug
			}
			s.log.LogAttrs(r.Context(), level, "request",
				slog.String("request_id", ri.id),
				slog.String("tenant", tenantOf(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", r.Pattern),
				slog.Int("status", status),
				slog.Int64("bytes", sw.bytes),
				slog.Duration("duration", d))
		}()
		if s.mountedHost(r) {
			// The mounted API's sandbox host names ({port}-{id}.{domain}).
			route = "e2b sandbox host or signed file"
			s.mount.ServeHTTP(sw, r)
			return
		}
		if l, ok := s.previewHost(r); ok {
			// A host-based preview owns its whole host: every path is the app's.
			route = "preview host"
			s.servePreview(sw, s.paceBody(sw, r), l)
			return
		}
		mux.ServeHTTP(sw, s.paceBody(sw, r))
	})
}

// incomingRequestID keeps a caller's request id when it is short and plain
// (so it cannot forge log lines), and makes a new one otherwise.
func incomingRequestID(id string) string {
	ok := id != "" && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	if ok {
		return id
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tenantHandler is a handler that runs for an authenticated tenant.
type tenantHandler func(w http.ResponseWriter, r *http.Request, tenant string) error

// authed checks the bearer token, then runs h and writes its error. A
// run-scoped token (a worker's) is refused here: it is good only on
// runAuthed endpoints of its own run.
func (s *Server) authed(h tenantHandler) http.Handler {
	return s.checkAuth(h, false)
}

// runAuthed is authed for the run tool endpoints ({id} in the path), which
// also take a run-scoped token for that one run; for any other run it is
// the same 404 as a run that does not exist.
func (s *Server) runAuthed(h tenantHandler) http.Handler {
	return s.checkAuth(h, true)
}

func (s *Server) checkAuth(h tenantHandler, runScoped bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, scope, err := s.authenticate(r)
		if err == nil && scope != "" {
			switch {
			case !runScoped:
				err = errdefs.Unauthenticated("this token belongs to one run (a worker's) and may only read that run (GET /v1/runs/{id}) and list and call its tools at /v1/runs/{id}/tools")
			case r.PathValue("id") != scope:
				if ri, _ := r.Context().Value(reqInfoKey).(*reqInfo); ri != nil {
					ri.mu.Lock()
					ri.tenant = tenant
					ri.mu.Unlock()
				}
				writeError(w, r, s.log, runstore.NoRun(r.PathValue("id")))
				return
			}
		}
		if err != nil {
			if !errors.Is(err, errdefs.ErrUnauthenticated) {
				err = errdefs.Unauthenticated("%v", err)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
			writeError(w, r, s.log, err)
			return
		}
		if ri, _ := r.Context().Value(reqInfoKey).(*reqInfo); ri != nil {
			ri.mu.Lock()
			ri.tenant = tenant
			ri.mu.Unlock()
		}
		if err := h(w, r, tenant); err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// authenticate returns the token's tenant and, for a run-scoped token, the
// one run it may use ("" for a tenant token).
// BearerToken is the token of r's "Authorization: Bearer <token>" header
// (the scheme in any case), as every part of sandboxd that authenticates
// reads it.
func BearerToken(r *http.Request) (string, bool) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, strings.EqualFold(scheme, "Bearer") && tok != ""
}

func (s *Server) authenticate(r *http.Request) (tenant, scope string, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", "", errdefs.Unauthenticated("this endpoint needs a bearer token; send the header \"Authorization: Bearer <token>\" (with no tenants configured, sandboxd serve writes the admin token to DATA_DIR/token)")
	}
	tok, ok := BearerToken(r)
	if !ok {
		return "", "", errdefs.Unauthenticated("the Authorization header is not a bearer token; send \"Authorization: Bearer <token>\"")
	}
	if tenant, known := s.auth.Authenticate(tok); known {
		return tenant, "", nil
	}
	if s.runTokens != nil {
		if sc, ok := s.runTokens.lookup(tok); ok {
			return sc.tenant, sc.run, nil
		}
	}
	return "", "", errdefs.Unauthenticated("the bearer token is not known; check that it is the whole token of a configured tenant (or the admin token in DATA_DIR/token)")
}

// baseURL is how the caller reached sandboxd (for workers' SANDBOXD_URL).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// BaseURL returns scheme://host that the request in ctx used to reach
// sandboxd, or "" outside a request.
func BaseURL(ctx context.Context) string {
	if ri, _ := ctx.Value(reqInfoKey).(*reqInfo); ri != nil {
		return ri.base
	}
	return ""
}
