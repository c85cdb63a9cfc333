package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Dialer connects to a TCP address inside a sandbox (the agent's dial).
type Dialer func(ctx context.Context, address string) (net.Conn, error)

// Target is where one proxied request goes.
type Target struct {
	Sandbox string // names the sandbox in error messages, and keys the connection pool
	Port    int
	Dial    Dialer
	// StripPrefix is taken off the front of the request's path to give
	// the app's ("/v1/sandboxes/{id}/ports/3000", "/p/{token}"; "" for a
	// host-based preview).
	StripPrefix string
	// Mount is put in front of a redirect's absolute path, so the app's
	// "Location: /login" stays under the proxy (StripPrefix, usually).
	Mount string
	// Fail writes an error response in the API's shape.
	Fail func(w http.ResponseWriter, status int, code, msg string)
	// Host is the Host header the app gets; "" is localhost:{Port}.
	Host string
}

// ErrNothingListens is a dial refused on both loopback addresses.
var ErrNothingListens = errors.New("nothing listens")

// Connection pool bounds: one transport per sandbox and port, its idle
// connections (each an agent stream and a socket in the sandbox) closed
// after idleConn.
const (
	maxTransports = 512
	maxIdlePer    = 16
	idleConn      = time.Minute
)

// Proxy passes requests to ports inside sandboxes through the agent's
// dial. Bodies stream both ways unbuffered, responses are flushed as they
// come (server-sent events), and Upgrade requests (WebSocket) are spliced
// once the app agrees. Connections are kept for reuse per sandbox and
// port. It has no goroutines of its own beyond net/http's per connection;
// Close closes the idle connections.
type Proxy struct {
	rp *httputil.ReverseProxy

	mu    sync.Mutex            // guards pool
	pool  map[string]*transport // by sandbox and port
	clock func() time.Time
}

type transport struct {
	*http.Transport
	used time.Time
}

type targetKey struct{}

// NewProxy returns an empty proxy.
func NewProxy() *Proxy {
	p := &Proxy{pool: map[string]*transport{}, clock: time.Now}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      p,
		FlushInterval:  -1, // server-sent events and streamed bodies reach the client as they come
		ModifyResponse: modifyResponse,
		ErrorHandler:   errorHandler,
		ErrorLog:       nil,
	}
	return p
}

// Serve proxies r to t.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, &t)))
}

// RoundTrip sends the request over the transport of its target.
func (p *Proxy) RoundTrip(r *http.Request) (*http.Response, error) {
	t := r.Context().Value(targetKey{}).(*Target)
	return p.transportOf(t).RoundTrip(r)
}

func (p *Proxy) transportOf(t *Target) *http.Transport {
	key := t.Sandbox + "\x00" + strconv.Itoa(t.Port)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	if tr, ok := p.pool[key]; ok {
		tr.used = now
		return tr.Transport
	}
	if len(p.pool) >= maxTransports {
		// The least recently used goes; its requests in flight finish.
		var oldest string
		for k, tr := range p.pool {
			if oldest == "" || tr.used.Before(p.pool[oldest].used) {
				oldest = k
			}
		}
		p.pool[oldest].CloseIdleConnections()
		delete(p.pool, oldest)
	}
	tr := &transport{used: now, Transport: &http.Transport{
		DialContext:           dial,
		MaxIdleConnsPerHost:   maxIdlePer,
		IdleConnTimeout:       idleConn,
		ResponseHeaderTimeout: 0, // an app may think for as long as it likes
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}}
	p.pool[key] = tr
	return tr.Transport
}

// Close closes every idle connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, tr := range p.pool {
		tr.CloseIdleConnections()
		delete(p.pool, k)
	}
}

// fullClose makes Close end the connection's reads as well. The agent's
// stream closes only its writing half, the app may still answer; for a
// WebSocket cut by a revocation or an expiry, the proxy would go on
// reading the app until the app hung up, and the client's connection
// would stay open half-closed.
type fullClose struct{ net.Conn }

func (c fullClose) Close() error {
	_ = c.Conn.SetReadDeadline(time.Now()) // wakes a read in progress
	return c.Conn.Close()
}

// dial connects to the target's port on 127.0.0.1, then on ::1 (a server
// that listens on "localhost" may have only the IPv6 one).
func dial(ctx context.Context, _, _ string) (net.Conn, error) {
	t := ctx.Value(targetKey{}).(*Target)
	port := strconv.Itoa(t.Port)
	c, err := t.Dial(ctx, "127.0.0.1:"+port)
	if err == nil {
		return fullClose{c}, nil
	}
	if !refused(err) {
		return nil, err
	}
	c, err6 := t.Dial(ctx, "[::1]:"+port)
	if err6 == nil {
		return fullClose{c}, nil
	}
	if ctx.Err() != nil {
		return nil, err6
	}
	// Refused on 127.0.0.1 and not reached on ::1 (refused too, or a
	// sandbox without IPv6): nothing listens.
	return nil, fmt.Errorf("%w: %v", ErrNothingListens, err)
}

// refused reports whether the agent's dial found no listener (the
// agent's message carries the system's).
func refused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection refused")
}

func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*Target)
	out := pr.Out
	esc := strings.TrimPrefix(pr.In.URL.EscapedPath(), t.StripPrefix)
	if !strings.HasPrefix(esc, "/") {
		esc = "/" + esc
	}
	u, err := url.Parse(esc)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	out.URL.Scheme, out.URL.Host = "http", "127.0.0.1:"+strconv.Itoa(t.Port)
	out.URL.Path, out.URL.RawPath = u.Path, u.RawPath
	if q := out.URL.Query(); q.Has(CookieName) {
		q.Del(CookieName)
		out.URL.RawQuery = q.Encode()
	}
	// Development servers accept "localhost" as their host; the name the
	// browser used is in X-Forwarded-Host.
	out.Host = "localhost:" + strconv.Itoa(t.Port)
	if t.Host != "" {
		out.Host = t.Host
	}
	pr.SetXForwarded()
	// The tenant's token and sandboxd's own headers are not the app's.
	out.Header.Del("Authorization")
	for k := range out.Header {
		if strings.HasPrefix(k, "X-Sandboxd-") {
			out.Header.Del(k)
		}
	}
	stripCookie(out.Header)
}

// stripCookie takes the preview's own cookie out of the Cookie header.
func stripCookie(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var keep []string
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != CookieName && strings.TrimSpace(part) != "" {
				keep = append(keep, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// modifyResponse keeps the app's redirects under the proxy's mount.
func modifyResponse(resp *http.Response) error {
	t := resp.Request.Context().Value(targetKey{}).(*Target)
	if t.Mount == "" {
		return nil
	}
	if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		resp.Header.Set("Location", t.Mount+loc)
	}
	return nil
}

func errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	t := r.Context().Value(targetKey{}).(*Target)
	switch {
	case errors.Is(err, ErrNothingListens):
		t.Fail(w, http.StatusBadGateway, "bad_gateway", fmt.Sprintf("nothing listens on port %d in sandbox %s; start the server first, e.g. with the process tool", t.Port, t.Sandbox))
	case r.Context().Err() != nil:
		// The client left, or the link was revoked or expired while the
		// request ran: nobody reads an answer.
	case errors.Is(err, errdefs.ErrNotFound):
		t.Fail(w, http.StatusNotFound, "not_found", fmt.Sprintf("sandbox %s is gone; it was removed while the request ran", t.Sandbox))
	default:
		t.Fail(w, http.StatusBadGateway, "bad_gateway", fmt.Sprintf("port %d in sandbox %s did not answer (%v); check that the server is up and speaks HTTP", t.Port, t.Sandbox, err))
	}
}
