package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
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

// runServe runs the daemon until ctx ends (main owns the signals: the
// first SIGINT/SIGTERM ends ctx, a second one ends the process at once).
// It goes through the phases of daemon.go in order: load (everything
// validated, nothing opened), leaves, edges, serve, shut down.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	ld, err := load(f, log)
	if err != nil {
		return err
	}
	lv, err := ld.buildLeaves(ctx)
	if err != nil {
		return err
	}
	defer lv.close()
	ed, err := lv.buildEdges(ctx)
	if err != nil {
		return err
	}
	return ed.serve(ctx, stdout)
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
