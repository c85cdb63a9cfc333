package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cluster"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/e2b"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
	"github.com/sandboxd/sandboxd/webhooks"
)

// The daemon starts in phases, each a type made by the one before, so the
// order is in the types: a phase can use only what earlier phases built.
//
//	loaded  the flags and the config, every section validated (the tool
//	        families' too); nothing is opened or written yet.
//	leaves  the admin token, the backend, the replica, the metrics, the
//	        run store, the sandbox manager, the tool registry and the
//	        families registered on it: nothing here refers to the API.
//	edges   the HTTP API over the leaves, the replicas' router in front
//	        of it, the families started with it, the listener.
//	serve   until ctx ends; then the shutdown, only from main's context:
//	        the replica hands its conversations over, every family drains,
//	        the HTTP server drains, and leaves.close closes the rest in
//	        reverse order of building.

// loaded is the first phase: what the daemon will be, checked.
type loaded struct {
	flags serveFlags
	log   *slog.Logger
	cfg   *config.Config
	fams  *family.Set
	// list is the families fams holds, for the edges that stand on one
	// family's tool (the code interpreter on eval's).
	list   []family.Family
	tokens *api.RunTokens // workers' run-scoped tokens, issued by a family and accepted by the API
}

// load reads and validates everything before anything opens: a bad
// section of any family fails here, before the token file or any sandbox
// exists, in the config's one message shape.
func load(f serveFlags, log *slog.Logger) (*loaded, error) {
	tokens := api.NewRunTokens()
	list := families(tokens)
	fams := family.NewSet(list...)
	cfg, err := config.Load(f.configPath, fams.Validate)
	if err != nil {
		return nil, err
	}
	if f.podIndex {
		if f.listen, err = withPodIndex(f.listen); err != nil {
			return nil, err
		}
	}
	return &loaded{flags: f, log: log, cfg: cfg, fams: fams, list: list, tokens: tokens}, nil
}

// leaves is the second phase: everything the API stands on.
type leaves struct {
	*loaded
	auth      api.Authenticator
	tokenNote string
	backend   sandbox.Backend
	rep       *replica // nil without replication
	reg       *prometheus.Registry
	metrics   *metrics.Metrics
	runs      *runstore.Store
	runEnded  *runEndFanout
	mgr       *sandbox.Manager
	registry  *tools.Registry
	setup     *family.Setup        // what the families left for the edges
	attach    attachHooks          // what runs on every new agent pipe
	e2b       *e2b.Handler         // the E2B API; nil when the config turns it off
	events    *events.Bus          // lifecycle events, to the audit record and the webhooks
	hooks     *webhooks.Dispatcher // nil without webhooks

	closers []func() // what close runs, in reverse order
}

// buildLeaves opens the backend and builds the leaves. On an error what
// was opened is closed again.
func (ld *loaded) buildLeaves(ctx context.Context) (_ *leaves, err error) {
	lv := &leaves{loaded: ld}
	defer func() {
		if err != nil {
			lv.close()
		}
	}()
	log, cfg, f := ld.log, ld.cfg, ld.flags
	if err := startProfiler(ctx, log); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s cannot be created: %w", f.dataDir, err)
	}
	if lv.auth, lv.tokenNote, err = setupAuth(cfg, f.dataDir, log); err != nil {
		return nil, err
	}
	agentBin := agentBinary(f.agentBinary, cfg)
	if lv.backend, err = openBackend(ctx, f.backend, f.dataDir, agentBin, cfg, log); err != nil {
		return nil, err
	}
	if c, ok := lv.backend.(io.Closer); ok {
		lv.onClose(func() { c.Close() })
	}
	checkGVisor(ctx, cfg, lv.backend, log)
	if cfg.Replication.Enabled {
		if lv.rep, err = newReplica(ctx, cfg, lv.backend, f.listen, log); err != nil {
			return nil, err
		}
		lv.onClose(lv.rep.stop)
	}

	lv.reg = prometheus.NewRegistry()
	lv.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The webhooks start before what feeds them and close after it.
	if lv.hooks, err = startWebhooks(cfg, f.dataDir, lv.reg, log); err != nil {
		return nil, fmt.Errorf("the webhook metrics cannot be registered: %w", err)
	}
	lv.onClose(func() { closeWebhooks(lv.hooks, log) })
	lv.events = &events.Bus{}
	if lv.hooks != nil {
		lv.events.Add(lv.hooks)
	}
	lv.runEnded = &runEndFanout{}
	lv.runEnded.add(runEndedEvent(lv.events))
	lv.runEnded.add(func(r tools.Run, reason string) {
		log.Info("run ended", "run", r.ID, "tenant", r.Tenant, "conversation", r.Conversation, "reason", reason)
	})
	lv.runEnded.add(func(r tools.Run, _ string) { ld.fams.RunEnded(r) })
	keep := runstore.WithFile(filepath.Join(f.dataDir, "runs.json"), func(err error) { log.Warn("runs are not saved", "err", err) })
	if lv.rep != nil {
		keep = runstore.WithRecords(lv.rep.records, func(err error) { log.Warn("a run record was not written", "err", err) })
	}
	lv.runs = runstore.New(runstore.WithTTL(cfg.RunTTL.D()), runstore.WithMaxPerTenant(cfg.MaxRunsPerTenant), keep,
		runstore.WithEndHook(lv.runEnded.ended), runstore.WithCreateHook(runCreatedEvent(lv.events)))
	if n, err := lv.runs.Load(); err != nil {
		log.Warn("runs of the previous start are not restored", "err", err)
	} else if n > 0 {
		log.Info("runs restored", "count", n)
	}
	if lv.metrics, err = metrics.New(lv.reg, metrics.WithVersion(version), metrics.WithBackend(lv.backend.Name()),
		metrics.WithRunsActive(lv.runs.Active)); err != nil {
		return nil, fmt.Errorf("metrics cannot be registered: %w", err)
	}

	pools := poolSpecs(cfg, lv.backend.Name())
	mgrOpts := []sandbox.Option{sandbox.WithIdleTTL(cfg.IdleTTL.D()), sandbox.WithLogger(log), sandbox.WithObserver(lv.metrics),
		sandbox.WithPools(pools...), sandbox.WithAttachHook(lv.attach.run), sandbox.WithLifecycleObserver(sandboxEvents{lv.events}),
		sandbox.WithLifecycle(func(info sandbox.Info) sandbox.Lifecycle { return lifecycleFor(cfg, info.Tenant) })}
	if lv.rep != nil {
		lv.attach.claim = lv.rep.claim
		mgrOpts = append(mgrOpts, lv.rep.managerOptions()...)
	}
	lv.mgr = sandbox.NewManager(lv.backend, mgrOpts...)
	lv.onClose(func() { lv.mgr.Close() })
	if lv.rep != nil {
		// The leases start before the manager: its first attach (a warm
		// pool's) asks them for the conversation's epoch.
		if err := lv.rep.start(cfg, lv.reg, hooks(lv.mgr, lv.runs, log), log); err != nil {
			return nil, err
		}
	}
	if err := lv.mgr.Start(ctx); err != nil {
		return nil, fmt.Errorf("the sandbox manager cannot start: %w", err)
	}
	if err := registerAll(lv.reg, metrics.Sandboxes(lv.backend.Name(), lv.mgr.Counts),
		metrics.Pools(poolImages(pools), lv.mgr.PoolStats)); err != nil {
		return nil, fmt.Errorf("the sandbox metrics cannot be registered: %w", err)
	}
	if lv.rep == nil {
		// A lone daemon exports the replica series at its own values (it
		// owns every conversation with a sandbox), so the dashboard's
		// replica panels are never empty.
		if err := cluster.RegisterSingleReplica(lv.reg, func() int { return sum(lv.mgr.Counts()) }); err != nil {
			return nil, fmt.Errorf("the replica metrics cannot be registered: %w", err)
		}
	}

	lv.registry = tools.NewRegistry(tools.WithObserver(lv.metrics), tools.WithLogger(log))
	setup := &family.Setup{Config: cfg, Log: log, DataDir: f.dataDir, AgentBinary: agentBin, Tools: lv.registry, Runs: lv.runs, Events: lv.events,
		Annotate: func(ctx context.Context, info sandbox.Info, key, value string) error {
			return lv.mgr.Annotate(ctx, info.Tenant, info.ID, key, value)
		}}
	if err := ld.fams.Register(setup); err != nil {
		return nil, err
	}
	lv.attach.set(setup.AttachHooks())
	if keeps := setup.KeepPipes(); len(keeps) > 0 {
		lv.mgr.SetKeepAttached(func(info sandbox.Info) bool {
			if lv.rep != nil && !lv.rep.holds(info) {
				return false // its owner keeps it
			}
			for _, keep := range keeps {
				if keep(info) {
					return true
				}
			}
			return false
		})
	}
	lv.onClose(func() {
		if err := ld.fams.Close(); err != nil {
			log.Warn("a tool family did not close cleanly", "err", err)
		}
	})
	if err := registerAll(lv.reg, ld.fams.Collectors()...); err != nil {
		return nil, fmt.Errorf("the tool families' metrics cannot be registered: %w", err)
	}
	// Every tool's series exist at zero from the first scrape.
	lv.metrics.SetTools(lv.registry.Specs())
	lv.setup = setup
	return lv, nil
}

// onClose adds f to what close runs (last added, first run).
func (lv *leaves) onClose(f func()) { lv.closers = append(lv.closers, f) }

// close closes the leaves in reverse order of building: the families,
// then the manager (it closes its pipes; processes in the sandboxes keep
// running), the replica's informers, and last the backend's client.
func (lv *leaves) close() {
	for i := len(lv.closers) - 1; i >= 0; i-- {
		lv.closers[i]()
	}
	lv.closers = nil
}

// edges is the third phase: the HTTP API and what fronts it.
type edges struct {
	*leaves
	handler http.Handler
	ln      net.Listener
}

// buildEdges builds the API over the leaves, starts the families with it
// and listens.
func (lv *leaves) buildEdges(ctx context.Context) (*edges, error) {
	cfg, log := lv.cfg, lv.log
	hostPaths := api.HostPaths{Allowed: cfg.AllowedHostPaths}
	if cfg.Path == "" {
		hostPaths.AnyForTenant = api.AdminTenantName
	}
	var pinger api.Pinger = lv.mgr
	if lv.rep != nil {
		pinger = readyPinger{engine: lv.mgr, owners: lv.rep.owners}
	}
	services, err := serviceOptions(lv.setup.Services())
	if err != nil {
		return nil, err
	}
	var envHooks []api.EnvHook
	for _, h := range lv.setup.EnvHooks() {
		envHooks = append(envHooks, api.EnvHook(h))
	}
	if len(cfg.Tenants) == 0 {
		// The admin token is the deployment's one token: it reads every
		// record, those of requests no tenant made included.
		services = append(services, api.WithAuditAll(api.AdminTenantName))
	}
	e2bOpt, err := lv.e2bOption()
	if err != nil {
		return nil, err
	}
	if e2bOpt != nil {
		services = append(services, e2bOpt)
	}
	srv := api.New(lv.mgr, lv.registry, lv.auth, append([]api.Option{
		api.WithLogger(log), api.WithRuns(lv.runs), api.WithObserver(lv.metrics), api.WithPinger(pinger), api.WithGatherer(lv.reg),
		api.WithHostPaths(hostPaths), api.WithDefaultImage(cfg.DefaultImage),
		api.WithBodyLimits(cfg.Limits.MaxBodyBytes, cfg.Limits.MaxToolBodyBytes),
		api.WithToolStream(cfg.Limits.StreamHeartbeat.D(), cfg.Limits.MaxStreamBytes),
		api.WithEnvHooks(envHooks...), api.WithReadyNotes(lv.mgr.PoolProblems), api.WithRunTokens(lv.tokens),
		api.WithProcesses(cfg.Processes.MaxRunning, cfg.Processes.RingBytes),
		api.WithLifecycleDefaults(func(tenant string) sandbox.Lifecycle { return lifecycleFor(cfg, tenant) }),
		api.WithRuntimePolicy(func(tenant string) api.RuntimePolicy {
			return api.RuntimePolicy{Default: cfg.RuntimeFor(tenant), Allowed: cfg.RuntimesFor(tenant), ReadOnlyRoot: cfg.ReadOnlyRootFor(tenant)}
		}),
	}, services...)...)
	// A run that expires or ends with its parent drops its MCP sessions at
	// once, not on their next use.
	lv.runEnded.add(func(r tools.Run, _ string) { srv.EndMCPSessions(r.ID) })
	if err := lv.fams.Start(ctx, srv); err != nil {
		return nil, err
	}
	var handler http.Handler = srv
	if lv.rep != nil {
		handler = lv.rep.handler(handler, lv.runs, lv.backend, lv.auth, lv.e2b, cfg, log)
	}
	ln, err := net.Listen("tcp", lv.flags.listen)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w; pick another address with --listen", lv.flags.listen, err)
	}
	return &edges{leaves: lv, handler: handler, ln: ln}, nil
}

// serve serves until ctx ends, then shuts the edges down: the replica
// hands its conversations over while the server still forwards, every
// family drains (blocked questions and workers return at once), and the
// HTTP server waits for its requests, bounded by shutdownTimeout.
func (ed *edges) serve(ctx context.Context, stdout io.Writer) error {
	log, cfg := ed.log, ed.cfg
	url := "http://" + ed.ln.Addr().String()
	log.Info("sandboxd serving", "url", url, "backend", ed.backend.Name(), "version", version, "config", cfg.Path)
	fmt.Fprintf(stdout, "sandboxd %s serving on %s (backend %s)\n%s", version, url, ed.backend.Name(), ed.tokenNote)

	hs := &http.Server{
		Handler:           ed.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// The API paces each body (api.DefaultBodyTimeout plus a second per
		// 256 KiB); this is the outer bound on reading any request, head and
		// body, a little past the pace of the largest body allowed. net/http
		// clears it once the body is read, so it never reaches a handler.
		ReadTimeout: 20*time.Second + api.BodyAllowance(api.DefaultBodyTimeout,
			max(cfg.Limits.MaxBodyBytes, cfg.Limits.MaxToolBodyBytes, config.DefaultMaxToolBodyBytes)),
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a tool call may legitimately run for minutes,
		// and an SSE stream of a space stays open while a human watches.
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ed.ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("the HTTP server stopped: %w", err)
	case <-ctx.Done():
	}
	if ed.rep != nil {
		ed.rep.drain(log)
	}
	log.Info("shutting down", "deadline", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	ed.fams.Drain(sctx)
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("requests still running at the shutdown deadline were cut off", "err", err)
		hs.Close()
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("HTTP server", "err", err)
	}
	log.Info("stopped")
	return nil
}

// serviceOptions hands the API the services the families gave it; a
// service the API does not know is a wiring mistake, refused at start-up.
func serviceOptions(services []any) ([]api.Option, error) {
	var opts []api.Option
	for _, s := range services {
		switch s := s.(type) {
		case api.Questions:
			opts = append(opts, api.WithQuestions(s))
		case api.Calls:
			opts = append(opts, api.WithCalls(s))
		case api.Egress:
			opts = append(opts, api.WithEgress(s))
		case api.Previews:
			opts = append(opts, api.WithPreviews(s))
		case api.Audit:
			opts = append(opts, api.WithAudit(s))
		default:
			return nil, fmt.Errorf("a tool family handed the API a service of type %T, which it does not serve; add its routes to the API first", s)
		}
	}
	return opts, nil
}

// attachHooks run on every agent pipe the manager opens: the replica's
// claim first (a pipe is fenced before anything uses it), then the
// families' hooks. The manager is made before the families register, and
// may open a pipe (a warm pool's) meanwhile; such a pipe gets the hooks
// registered so far.
type attachHooks struct {
	claim func(ctx context.Context, info sandbox.Info, c *agent.Client) error // nil without replication

	mu    sync.Mutex // guards hooks
	hooks []family.AttachHook
}

func (a *attachHooks) set(hooks []family.AttachHook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hooks = hooks
}

func (a *attachHooks) run(ctx context.Context, info sandbox.Info, c *agent.Client) error {
	if a.claim != nil {
		if err := a.claim(ctx, info, c); err != nil {
			return err
		}
	}
	a.mu.Lock()
	hooks := a.hooks
	a.mu.Unlock()
	for _, h := range hooks {
		if err := h(ctx, info, c); err != nil {
			return err
		}
	}
	return nil
}

// sum adds up the counts (a conversation has at most one sandbox, so the
// sandboxes by state add up to the conversations with one).
func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// runEndFanout is the run store's one run-end hook, passed on to every
// listener: the log, the families, and (added when the API is built) the
// MCP sessions. Listeners are added during start-up only.
type runEndFanout struct {
	mu        sync.Mutex // guards listeners
	listeners []func(r tools.Run, reason string)
}

func (f *runEndFanout) add(l func(r tools.Run, reason string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listeners = append(f.listeners, l)
}

func (f *runEndFanout) ended(r tools.Run, reason string) {
	f.mu.Lock()
	ls := append([]func(tools.Run, string){}, f.listeners...)
	f.mu.Unlock()
	for _, l := range ls {
		l(r, reason)
	}
}

// lifecycleFor is the tenant's default lifecycle from the config.
func lifecycleFor(cfg *config.Config, tenant string) sandbox.Lifecycle {
	l := cfg.LifecycleFor(tenant)
	return sandbox.Lifecycle{PauseAfter: l.PauseAfter.D(), HibernateAfter: l.HibernateAfter.D(), DeleteAfter: l.DeleteAfter.D()}
}
