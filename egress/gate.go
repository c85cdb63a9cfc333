package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults for the Config fields left zero.
const (
	DefaultMaxConns       = 256
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultConnectTimeout = 10 * time.Second

	// maxHeaderBytes caps a request's or response's header block.
	maxHeaderBytes = 64 << 10
	// headerTimeout bounds reading a request's header block once the client
	// started a connection, and the TLS handshakes of an intercepted tunnel.
	headerTimeout = 30 * time.Second
	// helloTimeout bounds reading the ClientHello after the 200.
	helloTimeout = 10 * time.Second
	// recentMax is the size of a Gate's ring of recent decisions.
	recentMax = 1000
	// maxAddrs caps the resolved addresses tried for one connection.
	maxAddrs = 8
)

// Resolver resolves host names; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Config is shared by every sandbox of a daemon.
type Config struct {
	// Hosts are the operator's resolver overrides, by lower-case name; their
	// addresses are trusted as given.
	Hosts map[string][]netip.Addr
	// Resolver answers every other name; nil means net.DefaultResolver.
	Resolver Resolver
	// RootCAs verifies the upstreams of intercepted tunnels; nil means the
	// system pool.
	RootCAs *x509.CertPool
	// Authority signs the certificates of intercepted hosts; without one a
	// tunnel to a host a secret names is refused.
	Authority *Authority
	// MaxConns caps a sandbox's open client connections (0: 256).
	MaxConns int
	// IdleTimeout closes a tunnel idle both ways, or a client connection
	// waiting for its next request, after this long (0: 5m).
	IdleTimeout time.Duration
	// ConnectTimeout bounds resolving and dialing an upstream (0: 10s).
	ConnectTimeout time.Duration
	// Dial opens upstream connections; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Record is called once per decision, after the connection or request
	// ended; it must not block for long.
	Record func(Decision)
	// Log receives one line per decision at debug level; nil discards.
	Log *slog.Logger
}

// Proxy holds the configuration every sandbox's Gate shares. It starts no
// goroutines of its own.
type Proxy struct {
	cfg Config
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Proxy, error) {
	if cfg.MaxConns < 0 || cfg.IdleTimeout < 0 || cfg.ConnectTimeout < 0 {
		return nil, errors.New("egress: MaxConns, IdleTimeout and ConnectTimeout must not be negative; leave them zero for the defaults")
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	hosts := make(map[string][]netip.Addr, len(cfg.Hosts))
	for name, addrs := range cfg.Hosts {
		hosts[normalizeHost(name)] = append([]netip.Addr(nil), addrs...)
	}
	cfg.Hosts = hosts
	return &Proxy{cfg: cfg}, nil
}

// Identity names the sandbox a Gate serves, for the decision records.
type Identity struct{ Tenant, Sandbox, Conversation string }

// Secret is a credential the proxy adds to requests for its hosts, so that
// the sandbox never holds it.
type Secret struct {
	Name string
	// Hosts are host rules (with an optional port) whose requests carry it.
	Hosts []Rule
	// Header is the header set; "" means "Authorization".
	Header string
	// Format is the header value with "{}" standing for the secret; "" means
	// "{}".
	Format string
	// Basic makes the value "Basic base64(BasicUser:secret)".
	BasicUser string
	Basic     bool
	// Value reads the secret at each use, so a rotated file takes effect.
	Value func() (string, error)
}

// Decision records one decision about a connection or request. It never
// holds a secret's value.
type Decision struct {
	Time                          time.Time
	Tenant, Sandbox, Conversation string
	// Kind is "connect" (a tunnel), "intercept" (a request inside an
	// intercepted tunnel) or "http" (a plain-HTTP proxied request).
	Kind string
	Host string
	Port int
	// Addr is the ip:port dialed, "" when none was.
	Addr string
	Rule string
	// Allowed is true when the policy allowed the connection or request and
	// it reached the upstream; a refusal, a failed dial and a cut are false.
	Allowed bool
	// Reason is one short sentence: the verdict's reason, or what failed.
	Reason string
	// Secrets names the secrets added to the request.
	Secrets            []string
	BytesUp, BytesDown int64
	Duration           time.Duration
}

// Gate is one sandbox's way out: it serves the sandbox's proxied client
// connections under the sandbox's policy and records every decision.
//
// Goroutines: Gate starts none of its own. Each Serve call runs on its
// caller's goroutine and, while it serves, runs at most two more at a time:
// one per direction while a tunnel or an upgraded connection is spliced, or
// one that writes a request upstream while its response is read; and, once
// Serve's context ends, the context.AfterFunc that closes the connection.
// All of them end before Serve returns. Close closes every open connection,
// which ends every Serve; nothing else needs shutting down.
type Gate struct {
	p  *Proxy
	id Identity

	// mu guards policy, secrets, conns, closed, and the ring of recent
	// decisions (recent, next).
	mu      sync.Mutex
	policy  Effective
	secrets []Secret
	conns   map[*clientConn]struct{}
	closed  bool
	recent  []Decision
	next    int
}

// Gate makes the gate of one sandbox.
func (p *Proxy) Gate(id Identity, policy Effective, secrets []Secret) *Gate {
	return &Gate{
		p:       p,
		id:      id,
		policy:  policy,
		secrets: append([]Secret(nil), secrets...),
		conns:   map[*clientConn]struct{}{},
	}
}

// Policy is the policy new connections and requests follow.
func (g *Gate) Policy() Effective {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.policy
}

// SetPolicy makes e the policy at once: new connections and requests follow
// it, and every open connection whose destination it refuses is closed.
func (g *Gate) SetPolicy(e Effective) {
	g.mu.Lock()
	g.policy = e
	open := make([]*clientConn, 0, len(g.conns))
	for c := range g.conns {
		open = append(open, c)
	}
	g.mu.Unlock()
	for _, c := range open {
		c.recheck(e)
	}
}

// SetSecrets replaces the secrets; requests that start afterwards use them.
func (g *Gate) SetSecrets(s []Secret) {
	g.mu.Lock()
	g.secrets = append([]Secret(nil), s...)
	g.mu.Unlock()
}

func (g *Gate) state() (Effective, []Secret) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.policy, g.secrets
}

// Open is the number of client connections being served within the limit.
func (g *Gate) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for c := range g.conns {
		if c.counted {
			n++
		}
	}
	return n
}

// Recent returns up to limit recent decisions, newest first.
func (g *Gate) Recent(limit int) []Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.recent)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Decision, 0, limit)
	for i := 1; i <= limit; i++ {
		out = append(out, g.recent[(g.next-i+n)%n])
	}
	return out
}

// Close closes every open connection, so every Serve returns, and makes
// later Serve calls close their connection at once.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	open := make([]*clientConn, 0, len(g.conns))
	for c := range g.conns {
		open = append(open, c)
	}
	g.mu.Unlock()
	for _, c := range open {
		c.cut("cut because the sandbox's proxy closed")
	}
}

// admit registers a client connection; counted is false when the sandbox is
// at its limit, and ok is false once the Gate is closed.
func (g *Gate) admit(c *clientConn) (counted, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, false
	}
	n := 0
	for o := range g.conns {
		if o.counted {
			n++
		}
	}
	c.counted = n < g.p.cfg.MaxConns
	g.conns[c] = struct{}{}
	return c.counted, true
}

func (g *Gate) release(c *clientConn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// record completes d, keeps it in the ring and hands it to Config.Record.
func (g *Gate) record(d Decision) {
	d.Tenant, d.Sandbox, d.Conversation = g.id.Tenant, g.id.Sandbox, g.id.Conversation
	if d.Time.IsZero() {
		d.Time = time.Now()
	}
	g.mu.Lock()
	if len(g.recent) < recentMax {
		g.recent = append(g.recent, d)
		g.next = len(g.recent) % recentMax
	} else {
		g.recent[g.next] = d
		g.next = (g.next + 1) % recentMax
	}
	g.mu.Unlock()
	g.p.cfg.Log.Debug("egress decision", "sandbox", d.Sandbox, "kind", d.Kind, "host", d.Host, "port", d.Port,
		"addr", d.Addr, "allowed", d.Allowed, "rule", d.Rule, "reason", d.Reason, "secrets", d.Secrets,
		"bytes_up", d.BytesUp, "bytes_down", d.BytesDown, "duration", d.Duration)
	if g.p.cfg.Record != nil {
		g.p.cfg.Record(d)
	}
}
