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
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// shutdownTimeout bounds how long in-flight requests may finish after a
// signal; tool calls still running then are cut off.
const shutdownTimeout = 20 * time.Second

type serveFlags struct {
	listen      string
	dataDir     string
	backend     string
	configPath  string
	agentBinary string
	logFormat   string
	logLevel    string
	podIndex    bool
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	cmd := newCommand("serve", "sandboxd serve [--listen 127.0.0.1:7788] [--data-dir DIR] [--backend auto|docker|host|containerd|kubernetes] [--config FILE] ...")
	fs := cmd.fs
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7788", "address to serve the API on")
	fs.StringVar(&f.dataDir, "data-dir", envOr("SANDBOXD_DATA_DIR", ".data"), "directory for the admin token and host-backend sandboxes")
	fs.StringVar(&f.backend, "backend", "auto", "sandbox backend: auto, docker, host, containerd or kubernetes")
	fs.StringVar(&f.configPath, "config", "", "YAML config file (none: no tenants, the admin token may use any host path)")
	fs.StringVar(&f.agentBinary, "agent-binary", "", "sandbox-agent binary (default: config docker.agent_binary, else beside this executable)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&f.podIndex, "listen-add-pod-index", false, "add $SANDBOXD_POD_INDEX (a StatefulSet pod's index) to the --listen port, for replicas on one host's network")
	pos, err := cmd.parse(args)
	if err != nil {
		return f, err
	}
	if len(pos) > 0 {
		return f, usagef("serve takes no arguments, got %q; use flags such as --listen", pos[0])
	}
	return f, nil
}

// runServe runs the daemon until ctx ends (SIGINT/SIGTERM), then shuts down:
// the HTTP server stops taking requests and drains (bounded by
// shutdownTimeout), then the manager closes its pipes (processes in the
// sandboxes keep running), then the backend releases its client.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := config.Load(f.configPath)
	if err != nil {
		return err
	}
	if err := startProfiler(ctx, log); err != nil {
		return err
	}
	if f.podIndex {
		if f.listen, err = withPodIndex(f.listen); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s cannot be created: %w", f.dataDir, err)
	}

	auth, tokenNote, err := setupAuth(cfg, f.dataDir, log)
	if err != nil {
		return err
	}
	agentBin := agentBinary(f.agentBinary, cfg)
	backend, err := openBackend(ctx, f.backend, f.dataDir, agentBin, cfg, log)
	if err != nil {
		return err
	}
	if c, ok := backend.(io.Closer); ok {
		defer c.Close()
	}

	var rep *replica
	if cfg.Replication.Enabled {
		if rep, err = newReplica(ctx, cfg, backend, f.listen, log); err != nil {
			return err
		}
		defer rep.stop()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// w is filled by registerTools below; the run-end hook reads it only
	// when a run ends, which happens after wiring.
	w := &wiring{log: log, cfg: cfg, dataDir: f.dataDir, agentBin: agentBin}
	keep := runstore.WithFile(filepath.Join(f.dataDir, "runs.json"), func(err error) { log.Warn("runs are not saved", "err", err) })
	if rep != nil {
		keep = runstore.WithRecords(rep.records, func(err error) { log.Warn("a run record was not written", "err", err) })
	}
	runs := runstore.New(runstore.WithTTL(cfg.RunTTL.D()), runstore.WithMaxPerTenant(cfg.MaxRunsPerTenant), keep,
		runstore.WithEndHook(func(r tools.Run, reason string) {
			log.Info("run ended", "run", r.ID, "tenant", r.Tenant, "conversation", r.Conversation, "reason", reason)
			for _, h := range w.runEnd {
				h(r)
			}
		}))
	if n, err := runs.Load(); err != nil {
		log.Warn("runs of the previous start are not restored", "err", err)
	} else if n > 0 {
		log.Info("runs restored", "count", n)
	}
	// The manager observes pipes into the metrics, and the metrics read the
	// manager's counts at scrape time; the closure breaks that cycle.
	var mgr *sandbox.Manager
	pools := poolSpecs(cfg, backend.Name())
	m, err := metrics.New(reg, append([]metrics.Option{metrics.WithVersion(version),
		metrics.WithSandboxCounts(backend.Name(), func() map[string]int { return mgr.Counts() }),
		metrics.WithRunsActive(runs.Active), poolMetrics(pools, &mgr)}, familyMetrics(cfg, &w.stats)...)...)
	if err != nil {
		return fmt.Errorf("metrics cannot be registered: %w", err)
	}
	mgrOpts := []sandbox.Option{sandbox.WithIdleTTL(cfg.IdleTTL.D()), sandbox.WithLogger(log), sandbox.WithObserver(m),
		sandbox.WithPools(pools...)}
	if rep != nil {
		if err := rep.start(cfg, reg, hooks(&mgr, runs, log), log); err != nil {
			return err
		}
		mgrOpts = append(mgrOpts, rep.managerOptions()...)
	}
	mgr = sandbox.NewManager(backend, mgrOpts...)
	defer mgr.Close()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("the sandbox manager cannot start: %w", err)
	}

	registry := tools.NewRegistry(tools.WithObserver(m), tools.WithLogger(log))
	w.registry, w.sandboxes, w.runs = registry, mgr, runs
	defer func() {
		for i := len(w.closers) - 1; i >= 0; i-- {
			w.closers[i]()
		}
	}()
	if err := registerTools(w); err != nil {
		return err
	}
	// Every tool's series exist at zero from the first scrape.
	m.SetTools(registry.Specs())

	hostPaths := api.HostPaths{Allowed: cfg.AllowedHostPaths}
	if cfg.Path == "" {
		hostPaths.AnyForTenant = api.AdminTenantName
	}
	var pinger api.Pinger = mgr
	if rep != nil {
		pinger = readyPinger{engine: mgr, owners: rep.owners}
	}
	apiOpts := append([]api.Option{
		api.WithLogger(log), api.WithRuns(runs), api.WithObserver(m), api.WithPinger(pinger), api.WithGatherer(reg),
		api.WithHostPaths(hostPaths), api.WithDefaultImage(cfg.DefaultImage),
		api.WithBodyLimits(cfg.Limits.MaxBodyBytes, cfg.Limits.MaxToolBodyBytes),
		api.WithToolStream(cfg.Limits.StreamHeartbeat.D(), cfg.Limits.MaxStreamBytes),
		api.WithEnvHooks(w.envHooks...), api.WithReadyNotes(mgr.PoolProblems),
	}, w.apiOpts...)
	srv := api.New(mgr, registry, auth, apiOpts...)
	// A run that expires or ends with its parent drops its MCP sessions at
	// once, not on their next use.
	w.runEnd = append(w.runEnd, func(r tools.Run) { srv.EndMCPSessions(r.ID) })
	var handler http.Handler = srv
	if rep != nil {
		handler = rep.handler(handler, runs, backend, auth, cfg, log)
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w; pick another address with --listen", f.listen, err)
	}
	url := "http://" + ln.Addr().String()
	log.Info("sandboxd serving", "url", url, "backend", backend.Name(), "version", version, "config", cfg.Path)
	fmt.Fprintf(stdout, "sandboxd %s serving on %s (backend %s)\n%s", version, url, backend.Name(), tokenNote)

	hs := &http.Server{
		Handler:           handler,
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
	go func() { serveErr <- hs.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("the HTTP server stopped: %w", err)
	case <-ctx.Done():
	}
	if rep != nil {
		// Hand the conversations over while the server still forwards.
		rep.drain(log)
	}
	log.Info("shutting down", "deadline", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
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

// setupAuth returns the tenants' authenticator. With no tenants configured
// the admin token in DATA_DIR/token is made on the first start and reused.
func setupAuth(cfg *config.Config, dataDir string, log *slog.Logger) (api.Authenticator, string, error) {
	if len(cfg.Tenants) > 0 {
		var toks []api.TenantToken
		for _, t := range cfg.Tenants {
			tt, err := api.ParseTenantToken(t.Name, t.TokenSHA256)
			if err != nil {
				return nil, "", err
			}
			toks = append(toks, tt)
		}
		log.Info("tenants configured", "count", len(toks))
		return api.NewTokenAuth(toks...), "tenants come from the config file\n", nil
	}
	tok, path, created, err := api.LoadOrCreateAdminToken(dataDir)
	if err != nil {
		return nil, "", err
	}
	abs, _ := filepath.Abs(path)
	log.Info("no tenants configured: using the admin token", "file", abs, "created", created)
	tt, _ := api.ParseTenantToken(api.AdminTenantName, api.HashToken(tok))
	note := fmt.Sprintf("admin token: %s (try: curl -H \"Authorization: Bearer $(cat %s)\" ...)\n", abs, abs)
	return api.NewTokenAuth(tt), note, nil
}

// agentBinary picks the flag, then the config, then sandbox-agent beside
// this executable.
func agentBinary(flagValue string, cfg *config.Config) string {
	if flagValue != "" {
		return flagValue
	}
	if cfg.Docker.AgentBinary != "" {
		return cfg.Docker.AgentBinary
	}
	exe, err := os.Executable()
	if err != nil {
		return "sandbox-agent"
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Join(filepath.Dir(exe), "sandbox-agent")
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q is not a level; use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q is not known; use text or json", format)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
