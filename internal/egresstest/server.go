package egresstest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Caps on what a server remembers, so that a test that hammers a server
// (a benchmark, a download loop) cannot grow it without bound.
const (
	maxRequests  = 2000 // requests kept; older ones are dropped first
	maxErrorLogs = 200  // server error lines kept (TLS handshake failures)
	maxHeaderLen = 4096 // bytes kept of one header value
)

// Request is what a server saw of one request.
type Request struct {
	Time       time.Time
	Method     string
	Proto      string // "HTTP/1.1" or "HTTP/2.0"
	Path       string // the URL path, unescaped
	RawQuery   string
	Host       string // the Host header (the name:port the client dialled)
	Header     http.Header
	RemoteAddr string
	TLSServer  string // the server name of the TLS ClientHello (SNI), "" without one
	Status     int    // the response status; 0 while the handler still runs
}

// Option changes how a server is started.
type Option func(*options)

type options struct {
	listen string
	names  []string
	plain  bool
}

// ListenOn makes the server listen on addr instead of "127.0.0.1:0", for a
// peer that is not on the host's loopback (a container on Docker's bridge
// reaches the host at the bridge's gateway address). A port of 0 picks a
// free one; an IP address in addr is added to the certificate's names.
func ListenOn(addr string) Option { return func(o *options) { o.listen = addr } }

// AlsoNamed adds names to the server's certificate besides its host name
// and 127.0.0.1.
func AlsoNamed(names ...string) Option {
	return func(o *options) { o.names = append(o.names, names...) }
}

// PlainHTTP makes the server speak HTTP without TLS, for the proxy's
// plain-HTTP path (a request whose Host header is checked instead of a
// ClientHello). Its URLs then start with "http://".
func PlainHTTP() Option { return func(o *options) { o.plain = true } }

// Server is an HTTPS server on the host under a host name a test chooses,
// with a certificate from the test's CA for that name and for the address
// it listens on (127.0.0.1 by default), so that a program on the host can
// reach it by address and a sandbox through sandboxd by name. It records
// every request. PyPI, NPM, Git and GoProxy embed it.
//
// It runs net/http's accept goroutine and one goroutine per connection;
// Close (also run at the test's cleanup) stops accepting, closes every
// connection and returns when the listener is closed.
type Server struct {
	name   string
	scheme string // "https", or "http" with PlainHTTP
	ln     net.Listener
	srv    *http.Server

	mu       sync.Mutex // guards reqs (and each entry's Status), dropped, errs, closeErr, closed
	reqs     []*Request
	dropped  int
	errs     []string
	closeErr error
	closed   bool
}

// start serves h over TLS under name and closes the server at t's
// cleanup. name is a host name without a port.
func start(t testing.TB, ca *CA, name string, h http.Handler, opts []Option) *Server {
	t.Helper()
	s := listen(t, ca, name, opts)
	s.serve(h)
	return s
}

// listen makes a server listening under name that serves nothing yet, for
// a handler that needs the server (to log to it) before serve; it is
// closed at t's cleanup.
func listen(t testing.TB, ca *CA, name string, opts []Option) *Server {
	t.Helper()
	if name == "" || strings.ContainsAny(name, ":/ ") {
		t.Fatalf("egresstest: server name %q is not a host name; pass a bare name such as \"pypi.test\" (the port is the server's to pick)", name)
	}
	o := options{listen: "127.0.0.1:0"}
	for _, f := range opts {
		f(&o)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		t.Fatalf("egresstest: listen on %s for %s: %v", o.listen, name, err)
	}
	names := append([]string{name, "127.0.0.1"}, o.names...)
	if host, _, err := net.SplitHostPort(o.listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
			names = append(names, host)
		}
	}
	cert, err := ca.Leaf(names...)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s := &Server{name: name, scheme: "https", ln: ln}
	if o.plain {
		s.scheme = "http"
	}
	s.srv = &http.Server{
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(errorLog{s}, "", 0),
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// serve starts answering with h.
func (s *Server) serve(h http.Handler) {
	s.srv.Handler = s.record(h)
	go func() {
		var err error
		if s.scheme == "http" {
			err = s.srv.Serve(s.ln)
		} else {
			err = s.srv.ServeTLS(s.ln, "", "")
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logError("serve: " + err.Error())
		}
	}()
}

// Name is the host name the server's certificate is for.
func (s *Server) Name() string { return s.name }

// Addr is the address the server listens on, "127.0.0.1:PORT": the address
// to map the server's name to in sandboxd's egress.hosts (without the port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// HostPort is "name:PORT", what a client in a sandbox dials.
func (s *Server) HostPort() string { return net.JoinHostPort(s.name, strconv.Itoa(s.Port())) }

// URL is "https://name:PORT" ("http://" with PlainHTTP), the server's root
// as a sandbox names it.
func (s *Server) URL() string { return s.scheme + "://" + s.HostPort() }

// LoopbackURL is "https://127.0.0.1:PORT" ("http://" with PlainHTTP), the
// server's root for a program on the host, which has no resolver for the
// server's name.
func (s *Server) LoopbackURL() string {
	return s.scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port()))
}

// Requests are the requests the server received, oldest first: the last
// 2000 of them (Dropped says how many older ones were forgotten).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
		out[i].Header = r.Header.Clone()
	}
	return out
}

// Dropped is how many requests were forgotten to keep Requests capped.
func (s *Server) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Errors are the server's error log lines, such as TLS handshakes that
// failed because the client did not trust the CA or asked for another
// name: the last 200 of them.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// Close stops the server and closes every open connection. It is safe to
// call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		defer s.mu.Unlock()
		return s.closeErr
	}
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	s.ln.Close() // in case serve never ran; closing twice is harmless
	s.mu.Lock()
	s.closeErr = err
	s.mu.Unlock()
	return err
}

// record wraps h to remember each request before it is served and its
// status once it is.
func (s *Server) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &Request{
			Time:       time.Now(),
			Method:     r.Method,
			Proto:      r.Proto,
			Path:       r.URL.Path,
			RawQuery:   r.URL.RawQuery,
			Host:       r.Host,
			Header:     cappedHeader(r.Header),
			RemoteAddr: r.RemoteAddr,
		}
		if r.TLS != nil {
			rec.TLSServer = r.TLS.ServerName
		}
		s.mu.Lock()
		if len(s.reqs) >= maxRequests {
			n := len(s.reqs) - maxRequests + 1
			s.reqs = append(s.reqs[:0], s.reqs[n:]...)
			s.dropped += n
		}
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.mu.Lock()
			rec.Status = sw.status()
			s.mu.Unlock()
		}()
		h.ServeHTTP(sw, r)
	})
}

func (s *Server) logError(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) >= maxErrorLogs {
		s.errs = append(s.errs[:0], s.errs[1:]...)
	}
	s.errs = append(s.errs, line)
}

// errorLog takes net/http's error log lines into the server's Errors.
type errorLog struct{ s *Server }

func (l errorLog) Write(p []byte) (int, error) {
	l.s.logError(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func cappedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			if len(v) > maxHeaderLen {
				v = v[:maxHeaderLen]
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Flush lets a handler stream through the recorder (a slow download).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// notFound answers 404 with one sentence naming what was asked.
func notFound(w http.ResponseWriter, what string) {
	http.Error(w, fmt.Sprintf("egresstest: %s is not served here", what), http.StatusNotFound)
}

// cappedBuffer keeps the first 64 KiB written to it, for a command's error
// output, and drops the rest.
type cappedBuffer struct{ b strings.Builder }

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string { return c.b.String() }
