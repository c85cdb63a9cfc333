package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cluster"
	"github.com/sandboxd/sandboxd/cluster/runrecords"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/e2b"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
)

// drainTimeout bounds the graceful hand-off on SIGTERM: leases whose calls
// still run then are released anyway. It fits the chart's default grace
// period (30s) with the HTTP drain after it.
const drainTimeout = 15 * time.Second

// replica is this sandboxd's part in a replicated deployment (DESIGN.md
// §9); nil when replication is off.
//
// Shutdown order: Drain (no new ownership; each lease released once its
// calls end, its pipe detached first), then the HTTP server drains, then
// stop ends the lease informer, the renewer and the run records' informer.
type replica struct {
	cs      k8s.Interface
	ns      string
	dep     string
	self    cluster.Peer
	signer  *cluster.Signer
	records *runrecords.Store
	owners  *cluster.Owners
	metrics *cluster.Metrics
	ctx     context.Context // lives until stop, past the serve context
	stop    context.CancelFunc
}

// clientsetter is the capability of a backend that keeps its objects in a
// Kubernetes cluster.
type clientsetter interface {
	Clientset() k8s.Interface
}

// newReplica prepares replication from the config: the API client, the
// namespace, who this replica is and how peers reach it, the peer key, and
// the run records (started: every replica serves every run).
func newReplica(ctx context.Context, cfg *config.Config, backend sandbox.Backend, listen string, log *slog.Logger) (*replica, error) {
	rc := cfg.Replication
	cs, ok := backend.(clientsetter)
	if !ok {
		return nil, fmt.Errorf("replication.enabled needs the kubernetes backend (--backend kubernetes), not %s: replicas share conversations through Kubernetes Leases", backend.Name())
	}
	key, err := os.ReadFile(rc.PeerSecretFile)
	if err != nil {
		return nil, fmt.Errorf("replication.peer_secret_file %s cannot be read: %w", rc.PeerSecretFile, err)
	}
	self := cluster.Peer{Identity: firstOf(rc.Identity, os.Getenv("POD_NAME"), hostname()), URL: rc.AdvertiseURL}
	if self.URL == "" {
		if self.URL, err = advertiseURL(listen); err != nil {
			return nil, err
		}
	}
	signer, err := cluster.NewSigner([]byte(strings.TrimSpace(string(key))), self.Identity)
	if err != nil {
		return nil, fmt.Errorf("replication.peer_secret_file %s: %w", rc.PeerSecretFile, err)
	}
	ns := firstOf(rc.Namespace, kubernetes.PodNamespace())
	if ns == "" {
		return nil, fmt.Errorf("replication.namespace is not set and sandboxd does not run in a pod (no POD_NAMESPACE); name the namespace of the leases")
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &replica{cs: cs.Clientset(), ns: ns, dep: backend.Deployment().Name, self: self, signer: signer, ctx: rctx, stop: stop}
	r.records = runrecords.New(r.cs, ns, r.dep, runrecords.WithLogger(log.With("component", "run-records")))
	if err := r.records.Start(rctx); err != nil {
		stop()
		return nil, err
	}
	log.Info("replication on", "identity", self.Identity, "url", self.URL, "namespace", ns, "deployment", r.dep,
		"lease_duration", rc.LeaseDuration.D(), "renew_interval", rc.RenewInterval.D())
	return r, nil
}

// start takes this replica into the deployment: its member lease, the
// lease informer and the renewer. hooks say what ownership changes do.
func (r *replica) start(cfg *config.Config, reg prometheus.Registerer, hooks cluster.Hooks, log *slog.Logger) error {
	var err error
	r.owners = cluster.NewOwners(r.cs, cluster.Options{
		Namespace: r.ns, Deployment: r.dep, Self: r.self,
		LeaseDuration: cfg.Replication.LeaseDuration.D(), RenewInterval: cfg.Replication.RenewInterval.D(),
		Hooks: hooks, Log: log.With("component", "leases"),
	})
	if r.metrics, err = cluster.NewMetrics(reg, r.owners.Owned, func() int { return len(r.owners.Peers()) }); err != nil {
		return fmt.Errorf("replica metrics cannot be registered: %w", err)
	}
	r.owners.SetMetrics(r.metrics)
	return r.owners.Start(r.ctx)
}

// claim fences an agent pipe (the first of the attach hooks): a pipe is
// handed out only after the agent accepted this replica's epoch.
func (r *replica) claim(ctx context.Context, info sandbox.Info, c *agent.Client) error {
	epoch, err := r.owners.Epoch(cluster.Key{Tenant: info.Tenant, Conversation: info.Conversation})
	if err != nil {
		return err
	}
	return c.Claim(ctx, r.self.Identity, epoch)
}

// holds says whether this replica holds the lease of info's conversation.
func (r *replica) holds(info sandbox.Info) bool {
	_, err := r.owners.Epoch(cluster.Key{Tenant: info.Tenant, Conversation: info.Conversation})
	return err == nil
}

// managerOptions reap an idle sandbox only from the replica that holds
// (or takes) its conversation.
func (r *replica) managerOptions() []sandbox.Option {
	return []sandbox.Option{
		sandbox.WithReapGate(func(ctx context.Context, info sandbox.Info) (func(), bool) {
			route, err := r.owners.Resolve(ctx, cluster.Key{Tenant: info.Tenant, Conversation: info.Conversation}, true)
			if err != nil || !route.Local {
				return nil, false
			}
			return route.Done, true
		}),
	}
}

// hooks adopt a conversation's runs when its lease is taken and, when it
// is lost or released, detach its pipe (the agent's processes keep
// running for the next owner) and forget its runs without ending them.
func hooks(mgr *sandbox.Manager, runs *runstore.Store, log *slog.Logger) cluster.Hooks {
	return cluster.Hooks{
		Taken: func(ctx context.Context, k cluster.Key, epoch int64) {
			if n := runs.AdoptConversation(ctx, k.Tenant, k.Conversation); n > 0 {
				log.Info("runs adopted", "conversation", k.String(), "count", n)
			}
		},
		Lost: func(k cluster.Key, why string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if info, err := mgr.Lookup(ctx, k.Tenant, k.Conversation); err == nil {
				mgr.Detach(info.ID, why)
			}
			runs.ForgetConversation(k.Tenant, k.Conversation)
		},
	}
}

// handler puts the router in front of the API.
func (r *replica) handler(srv http.Handler, runs *runstore.Store, backend sandbox.Backend, auth api.Authenticator, e2bAPI *e2b.Handler, cfg *config.Config, log *slog.Logger) http.Handler {
	dep := backend.Deployment()
	return cluster.NewRouter(srv, cluster.RouterOptions{
		Owners:    r.owners,
		Forwarder: cluster.NewForwarder(r.signer, r.metrics, log.With("component", "forward")),
		Signer:    r.signer,
		Runs:      runs,
		Sandboxes: func(ctx context.Context, id string) (cluster.Key, bool) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			info, err := backend.Inspect(ctx, id)
			if err != nil || !dep.Owns(info.Labels) {
				return cluster.Key{}, false
			}
			return cluster.Key{Tenant: info.Tenant, Conversation: info.Conversation}, true
		},
		Previews: func(r *http.Request) (string, bool) {
			c, ok := ports.SandboxOf(r, cfg.Preview.Domain)
			return c.Sandbox, ok
		},
		Hosts: func(r *http.Request) (string, bool) {
			if e2bAPI == nil {
				return "", false
			}
			if _, id, ok := e2b.HostSandbox(r.Host, cfg.E2B.Domain); ok {
				return id, true
			}
			info, ok := e2bAPI.SignedSandbox(r.Context(), r)
			return info.ID, ok
		},
		Auth:    auth,
		MaxBody: cfg.Limits.MaxBodyBytes,
		Metrics: r.metrics,
		Log:     log.With("component", "router"),
	})
}

// drain hands every conversation over (bounded by drainTimeout).
func (r *replica) drain(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	log.Info("handing conversations over", "owned", r.owners.Owned(), "deadline", drainTimeout)
	r.owners.Drain(ctx)
}

// readyPinger makes /readyz say "not ready" while the replica cannot hold
// leases (API access cut, shutting down), beside the engine check.
type readyPinger struct {
	engine api.Pinger
	owners *cluster.Owners
}

func (p readyPinger) Ping(ctx context.Context) error {
	if err := p.owners.Ready(); err != nil {
		return err
	}
	return p.engine.Ping(ctx)
}

// advertiseURL is how peers reach a replica listening on listen: that
// address itself when it is a loopback one (replicas on one host's
// network, as in the tests), else the pod's IP at the listen port.
func advertiseURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q is not host:port: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "http://" + listen, nil
	}
	podIP := os.Getenv("POD_IP")
	if podIP == "" {
		return "", fmt.Errorf("replication: no advertise_url and no POD_IP to reach this replica at; set replication.advertise_url, or POD_IP from the downward API")
	}
	return "http://" + net.JoinHostPort(podIP, port), nil
}

// withPodIndex adds $SANDBOXD_POD_INDEX (a StatefulSet pod's ordinal) to
// listen's port, so that replicas sharing a host's network each get their
// own port.
func withPodIndex(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", usagef("--listen %q is not host:port: %v", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", usagef("--listen %q: --listen-add-pod-index needs a numeric port", listen)
	}
	idx, err := strconv.Atoi(os.Getenv("SANDBOXD_POD_INDEX"))
	if err != nil || idx < 0 {
		return "", usagef("--listen-add-pod-index needs SANDBOXD_POD_INDEX set to the pod's index (got %q); the chart sets it from the pod label apps.kubernetes.io/pod-index", os.Getenv("SANDBOXD_POD_INDEX"))
	}
	if p+idx > 65535 {
		return "", usagef("--listen port %d plus pod index %d is past 65535", p, idx)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+idx)), nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
