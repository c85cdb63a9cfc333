// Package gateway runs network mode "proxy" for a daemon: it turns the
// config's egress keys and secrets into each sandbox's layered policy,
// serves the connections the agent carries out of a proxy sandbox through
// that sandbox's egress.Gate, keeps the policy changes made through the
// API, and exports the decisions to Prometheus and the log.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Gateway is the egress service of one daemon.
//
// Goroutines: per agent pipe of a proxy sandbox, one that notes when the
// pipe closes (it ends with the pipe or Close). Each connection the agent
// carries is served on the goroutine the agent client hands it to
// (agent.IncomingHandler), until it ends or Close cuts it.
//
// Shutdown (Close): cancel the context every served connection runs
// under and close every sandbox's gate, which closes its connections.
type Gateway struct {
	log      *slog.Logger
	conf     *parsed
	proxy    *egress.Proxy
	ca       *egress.Authority
	dir      string // where the policy changes are kept (one file per sandbox) without annotations
	annotate func(ctx context.Context, info sandbox.Info, key, value string) error
	metrics  *collector
	events   events.Sink // nil: none
	ctx      context.Context
	cancel   context.CancelFunc

	// mu guards boxes and every box's own layer and proxy URL.
	mu    sync.Mutex
	boxes map[string]*box // by sandbox id
}

// box is one proxy sandbox's state here.
type box struct {
	info    sandbox.Info
	tenant  *tenantConf
	spec    sandbox.EgressSpec     // what creation asked for
	own     layer                  // the sandbox's layer now (creation's or the last PUT's)
	secrets []string               // the secrets it may use that its tenant has
	headers []sandbox.EgressHeader // its own headers now (creation's or the last PUT's)
	gate    *egress.Gate
	proxy   string    // the proxy's URL inside the sandbox, once its agent said
	pipes   int       // agent pipes serving it now
	idle    time.Time // when its last pipe closed; zero while one serves it
}

// forgetAfter is how long a box whose pipes all closed is kept (its recent
// decisions with it): a sandbox deleted meanwhile is forgotten after it,
// one still running gets a new box at its next pipe.
const forgetAfter = time.Hour

// Options are what New needs besides the config.
type Options struct {
	DataDir string // the CA and the policy changes live under DataDir/egress
	Log     *slog.Logger
	// Resolver answers the names the config does not override; nil: the
	// system's.
	Resolver egress.Resolver
	// Annotate keeps a policy change on the sandbox itself where the
	// backend can (so another replica reads it after a failover); nil, or
	// sandbox.ErrNoAnnotations, keeps it in DataDir.
	Annotate func(ctx context.Context, info sandbox.Info, key, value string) error
	// Events hears every decision (the audit record); nil: nobody.
	Events events.Sink
}

// Validate checks the egress keys of cfg without opening anything.
func Validate(cfg *config.Config) error {
	_, err := parseConfig(cfg)
	return err
}

// New builds the gateway: the CA (made once per data dir), the proxy.
func New(cfg *config.Config, o Options) (*Gateway, error) {
	conf, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(o.DataDir, "egress")
	caDir := dir
	if cfg.Egress.CADir != "" {
		caDir = cfg.Egress.CADir
	}
	ca, err := egress.LoadOrCreateAuthority(caDir)
	if err != nil {
		return nil, fmt.Errorf("egress.ca_dir: the CA in %s cannot be loaded or made: %w", caDir, err)
	}
	g := &Gateway{log: log, conf: conf, ca: ca, dir: filepath.Join(dir, "policies"), annotate: o.Annotate, metrics: newCollector(), events: o.Events, boxes: map[string]*box{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	e := cfg.Egress
	g.proxy, err = egress.New(egress.Config{
		Hosts: conf.hosts, Resolver: o.Resolver, RootCAs: conf.roots, Authority: ca,
		MaxConns: e.MaxConnections, IdleTimeout: e.IdleTimeout.D(), ConnectTimeout: e.ConnectTimeout.D(),
		Record: g.record, Log: log,
	})
	if err != nil {
		return nil, err
	}
	g.metrics.open = g.open
	return g, nil
}

// CertPEM is the CA certificate the sandboxes trust.
func (g *Gateway) CertPEM() []byte { return g.ca.CertPEM() }

// Close cuts every connection and forgets every sandbox.
func (g *Gateway) Close() error {
	g.cancel()
	g.mu.Lock()
	boxes := g.boxes
	g.boxes = map[string]*box{}
	g.mu.Unlock()
	for _, b := range boxes {
		b.gate.Close()
	}
	return nil
}

// Attach is the hook run on every new agent pipe: for a proxy sandbox it
// serves the connections the agent carries and turns the agent's proxy on.
// The pipe fails when that fails: a proxy sandbox without its proxy would
// only fail in every program later, less clearly.
func (g *Gateway) Attach(ctx context.Context, info sandbox.Info, c *agent.Client) error {
	if sandbox.NetworkOf(info) != sandbox.NetworkProxy {
		return nil
	}
	b := g.boxFor(info)
	c.HandleIncoming(func(in proto.Incoming, conn net.Conn) {
		if in.Kind != proto.IncomingEgress {
			conn.Close()
			return
		}
		b.gate.Serve(g.ctx, conn)
	})
	resp, err := c.Egress(ctx, string(g.ca.CertPEM()))
	if err != nil {
		c.HandleIncoming(nil)
		return fmt.Errorf("the egress proxy of sandbox %s (network proxy) cannot be turned on: %w", info.ID, err)
	}
	g.mu.Lock()
	b.proxy = resp.Proxy
	b.pipes++
	b.idle = time.Time{}
	g.mu.Unlock()
	go func() {
		select {
		case <-c.Done():
		case <-g.ctx.Done():
			return
		}
		g.mu.Lock()
		if b.pipes--; b.pipes == 0 {
			b.idle = time.Now()
		}
		g.mu.Unlock()
	}()
	return nil
}

// boxFor returns info's box, made on first use from its labels and the
// change kept for it.
func (g *Gateway) boxFor(info sandbox.Info) *box {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.boxes[info.ID]; b != nil && b.info.Tenant == info.Tenant {
		return b
	}
	g.forgetIdleLocked()
	b := &box{info: info, tenant: g.tenant(info.Tenant)}
	spec, err := sandbox.EgressOf(info)
	if err != nil {
		g.log.Error("a proxy sandbox's egress label is broken; it may reach nothing", "sandbox", info.ID, "err", err)
		b.own = layer{named: true} // the zero Policy: nothing
	} else {
		b.spec = spec
		if b.own, b.headers, err = g.ownLayer(info, spec); err != nil {
			g.log.Error("a proxy sandbox's egress rules do not parse; it may reach nothing", "sandbox", info.ID, "err", err)
			b.own, b.headers = layer{named: true}, nil
		}
	}
	for _, name := range spec.Secrets {
		if _, ok := b.tenant.secrets[name]; ok {
			b.secrets = append(b.secrets, name)
		} else {
			g.log.Warn("a proxy sandbox names a secret its tenant no longer has; it is not sent", "sandbox", info.ID, "secret", name)
		}
	}
	secrets := b.named()
	hs, err := headerSecrets(b.headers)
	if err != nil {
		g.log.Error("a proxy sandbox's own headers do not parse; they are not sent", "sandbox", info.ID, "err", err)
	}
	secrets = append(secrets, hs...)
	b.gate = g.proxy.Gate(egress.Identity{Tenant: info.Tenant, Sandbox: info.ID, Conversation: info.Conversation}, g.effective(b.tenant, b.own), secrets)
	g.boxes[info.ID] = b
	return b
}

// forgetIdleLocked drops the boxes no pipe has served for forgetAfter and
// with nothing open: the sandboxes deleted since.
func (g *Gateway) forgetIdleLocked() {
	for id, b := range g.boxes {
		if !b.idle.IsZero() && time.Since(b.idle) > forgetAfter && b.gate.Open() == 0 {
			b.gate.Close()
			delete(g.boxes, id)
		}
	}
}

// tenant is the tenant's conf; one the config no longer lists reaches
// nothing and has no secrets.
func (g *Gateway) tenant(name string) *tenantConf {
	if t := g.conf.tenants[name]; t != nil {
		return t
	}
	return &tenantConf{layer: layer{named: true}, secrets: map[string]egress.Secret{}, network: "none"}
}

// effective is the policy of a sandbox of t whose own layer is own. When
// neither the deployment nor the tenant names a destination, nothing is
// allowed, whatever the sandbox lists: what a proxy sandbox reaches is the
// operator's choice, never the API caller's alone.
func (g *Gateway) effective(t *tenantConf, own layer) egress.Effective {
	if !g.conf.deployment.named && !t.layer.named {
		return egress.Layered(egress.Policy{})
	}
	return egress.Layered(g.conf.deployment.policy, t.layer.policy, own.policy)
}

// change is a sandbox's layer as last set through the API.
type change struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
	// Headers are the sandbox's own headers since the change; nil (a
	// change kept before they could change) keeps creation's.
	Headers *[]sandbox.EgressHeader `json:"headers,omitempty"`
}

// ownLayer is the sandbox's layer and own headers: the last change kept
// for it (on the sandbox, else in the data dir), else what creation asked
// for.
func (g *Gateway) ownLayer(info sandbox.Info, spec sandbox.EgressSpec) (layer, []sandbox.EgressHeader, error) {
	var b []byte
	var err error
	where := "the sandbox's label " + sandbox.LabelEgressChange
	if raw := info.Labels[sandbox.LabelEgressChange]; raw != "" {
		b = []byte(raw)
	} else {
		where = g.changePath(info.ID)
		b, err = os.ReadFile(where)
		if errors.Is(err, os.ErrNotExist) {
			l, err := parseLayer(spec.Allow, spec.Deny)
			return l, spec.Headers, err
		}
	}
	var c change
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return layer{}, nil, fmt.Errorf("the kept policy change (%s) cannot be read (%v)", where, err)
	}
	headers := spec.Headers
	if c.Headers != nil {
		headers = *c.Headers
	}
	l, err := parseLayer(c.Allow, c.Deny)
	return l, headers, err
}

func (g *Gateway) changePath(id string) string {
	return filepath.Join(g.dir, strings.ReplaceAll(id, "/", "_")+".json")
}

// keep records a sandbox's change so that a restart, or another replica,
// applies it: on the sandbox where the backend can, else in the data dir
// (written atomically).
func (g *Gateway) keep(ctx context.Context, info sandbox.Info, c change) error {
	b, _ := json.Marshal(c)
	if g.annotate != nil {
		err := g.annotate(ctx, info, sandbox.LabelEgressChange, string(b))
		if !errors.Is(err, sandbox.ErrNoAnnotations) {
			return err
		}
	}
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		return errdefs.Unavailable("the policy change cannot be kept in %s (%v); check sandboxd's data dir and retry", g.dir, err)
	}
	path := g.changePath(info.ID)
	tmp := path + ".new"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return errdefs.Unavailable("the policy change cannot be kept in %s (%v); check sandboxd's data dir and retry", g.dir, err)
	}
	return nil
}

// open is the connections open through every gate.
func (g *Gateway) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, b := range g.boxes {
		n += b.gate.Open()
	}
	return n
}

// record counts, logs and emits one decision.
func (g *Gateway) record(d egress.Decision) {
	g.metrics.add(d)
	verdict, typ := "allow", events.EgressAllowed
	if !d.Allowed {
		verdict, typ = "deny", events.EgressDenied
	}
	if g.events != nil {
		g.events.Emit(events.Event{Type: typ, Time: d.Time.UTC(), Tenant: d.Tenant, Sandbox: d.Sandbox, Conversation: d.Conversation,
			Target: d.Kind + " " + net.JoinHostPort(d.Host, strconv.Itoa(d.Port)), Reason: d.Reason})
	}
	g.log.Info("egress", "decision", verdict, "kind", d.Kind, "tenant", d.Tenant, "sandbox", d.Sandbox, "conversation", d.Conversation,
		"host", d.Host, "port", d.Port, "addr", d.Addr, "rule", d.Rule, "reason", d.Reason, "secrets", strings.Join(d.Secrets, ","),
		"bytes_up", d.BytesUp, "bytes_down", d.BytesDown, "duration", d.Duration)
}

// names lists a tenant's secret names for a refusal.
func names(t *tenantConf) string {
	if len(t.names) == 0 {
		return "it has none"
	}
	return "it has " + strings.Join(slices.Clone(t.names), ", ")
}
