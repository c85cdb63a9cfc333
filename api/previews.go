package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Previews issues and checks the links that show a port of a sandbox to
// a browser without the tenant's token (package ports), and proxies.
type Previews interface {
	portProxy
	// Create issues a link to port for ttl (0: the default); base is
	// scheme://host the request reached sandboxd at.
	Create(ctx context.Context, info sandbox.Info, port int, ttl time.Duration, base string) (ports.Preview, error)
	List(ctx context.Context, info sandbox.Info, base string) []ports.Preview
	Revoke(ctx context.Context, info sandbox.Info, id string) error
	// Verify checks a request's link (signature, expiry, revocation known
	// here); Check completes it with what the sandbox itself records.
	Verify(l ports.Located) (ports.Claims, error)
	Check(c ports.Claims, info sandbox.Info) error
	// Cut is closed when the preview is revoked; done says the request
	// has ended.
	Cut(c ports.Claims) (cut <-chan struct{}, done func())
	// Domain is the host-based previews' domain, "" for path-based.
	Domain() string
}

var _ Previews = (*ports.Service)(nil)

// WithPreviews serves preview links from p. Without it the preview
// endpoints answer 503; the port proxy works either way.
func WithPreviews(p Previews) Option { return func(s *Server) { s.previews = p } }

// CreatePreviewRequest is the body of POST /v1/sandboxes/{id}/previews.
type CreatePreviewRequest struct {
	// Port is the TCP port inside the sandbox the link shows.
	Port int `json:"port"`
	// TTLSeconds is how long the link lives (default preview.default_ttl,
	// 1h; at most preview.max_ttl).
	TTLSeconds int `json:"ttl_s,omitempty"`
}

func (s *Server) previewsOf(r *http.Request, tenant string) (sandbox.Info, error) {
	if s.previews == nil {
		return sandbox.Info{}, errdefs.Unavailable("this sandboxd serves no preview links; use the port proxy (/v1/sandboxes/{id}/ports/{port}/) with your token")
	}
	return s.ownSandbox(r, tenant)
}

func (s *Server) createPreview(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req CreatePreviewRequest
	if err := decodeJSON(w, r, s.maxBody, &req); err != nil {
		return err
	}
	if err := ports.CheckPort(req.Port); err != nil {
		return err
	}
	info, err := s.previewsOf(r, tenant)
	if err != nil {
		return err
	}
	p, err := s.previews.Create(r.Context(), info, req.Port, time.Duration(req.TTLSeconds)*time.Second, BaseURL(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, p)
	return nil
}

func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.previewsOf(r, tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.previews.List(r.Context(), info, BaseURL(r.Context())))
	return nil
}

func (s *Server) deletePreview(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.previewsOf(r, tenant)
	if err != nil {
		return err
	}
	if err := s.previews.Revoke(r.Context(), info, r.PathValue("preview")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// servePathPreview serves /p/{token}/{path...}.
func (s *Server) servePathPreview(w http.ResponseWriter, r *http.Request) {
	l, ok := ports.Locate(r, "")
	if !ok {
		s.notFound(w, r)
		return
	}
	s.servePreview(w, r, l)
}

// previewHost reports whether r is for a host-based preview.
func (s *Server) previewHost(r *http.Request) (ports.Located, bool) {
	if s.previews == nil || s.previews.Domain() == "" {
		return ports.Located{}, false
	}
	l, ok := ports.Locate(r, s.previews.Domain())
	return l, ok && l.Host
}

// servePreview proxies a preview request once its link holds. It needs
// no token: the link is the permission, for one port of one sandbox.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, l ports.Located) {
	fail := func(err error) {
		if errors.Is(err, ports.ErrDenied) {
			writeJSON(w, http.StatusForbidden, ErrorBody{Error: ErrorDetail{Code: "permission_denied", Message: err.Error()}})
			return
		}
		writeError(w, r, s.log, err)
	}
	if s.previews == nil {
		fail(errdefs.NotFound("this sandboxd serves no preview links; this address is not one"))
		return
	}
	c, err := s.previews.Verify(l)
	if err != nil {
		fail(err)
		return
	}
	if l.Host && l.FromQuery {
		// The first visit: the link's token becomes a cookie of this host
		// only, so the page's own requests (scripts, fetches, WebSocket)
		// carry it; the address bar loses it.
		http.SetCookie(w, &http.Cookie{Name: ports.CookieName, Value: l.Token, Path: "/", Expires: c.ExpiresAt(),
			HttpOnly: true, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", SameSite: http.SameSiteLaxMode})
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Upgrade") == "" {
			u := *r.URL
			q := u.Query()
			q.Del(ports.CookieName)
			u.RawQuery = q.Encode()
			u.Scheme, u.Host = "", ""
			http.Redirect(w, r, u.String(), http.StatusFound)
			return
		}
	}
	_, info, err := s.pipe(r.Context(), c.Tenant, c.Sandbox)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = errdefs.NotFound("the sandbox this preview shows (%s) is gone; the link no longer leads anywhere", c.Sandbox)
		}
		fail(err)
		return
	}
	if err := s.previews.Check(c, info); err != nil {
		fail(err)
		return
	}
	// The request ends when the link expires or is revoked, even a
	// WebSocket that is open by then.
	ctx, cancel := context.WithDeadline(r.Context(), c.ExpiresAt())
	defer cancel()
	cut, done := s.previews.Cut(c)
	defer done()
	go func() {
		select {
		case <-cut:
			cancel()
		case <-ctx.Done():
		}
	}()
	prefix := ""
	if !l.Host {
		prefix = ports.PathPrefix + url.PathEscape(l.Token)
	}
	s.forward(w, r.WithContext(ctx), info, c.Port, prefix)
}
