// Package astgrep holds the structural search and rewrite tools: ast_grep,
// ast_edit and resolve (DESIGN.md §4). They match tree-sitter patterns over
// the sandbox's files, read in bulk through the sandbox agent; ast_edit only
// prepares a change, which resolve writes all or nothing or drops.
package astgrep

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

// config holds what the three tools share.
type config struct {
	eng         *engine.Engine
	store       *store
	maxFileSize int64 // larger files are not searched
	maxFiles    int   // files one search walks at most
	maxPreview  int   // bytes of diff shown by ast_edit
	now         func() time.Time
	editDir     string       // where prepared edits are copied inside the sandbox
	log         *slog.Logger // failures of the sandbox copies, which never fail a call
}

// Option changes a setting of the tools.
type Option func(*config)

// WithMaxFileSize skips files larger than n bytes (default 1 MiB).
func WithMaxFileSize(n int64) Option { return func(c *config) { c.maxFileSize = n } }

// WithMaxFiles caps the files one search considers (default 200000).
func WithMaxFiles(n int) Option { return func(c *config) { c.maxFiles = n } }

// WithEditLimits bounds prepared edits: their time to live, how many one run
// holds (the oldest is dropped first) and the bytes of new content one holds
// (defaults 15 minutes, 16, 32 MiB).
func WithEditLimits(ttl time.Duration, perRun int, maxBytes int64) Option {
	return func(c *config) { c.store.ttl, c.store.perRun, c.store.maxBytes = ttl, perRun, maxBytes }
}

// WithClock replaces the clock the edit TTL is measured with (tests).
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now; c.store.now = now }
}

// WithEditDir sets the directory inside the sandbox where prepared edits
// are copied for other replicas (default DefaultEditDir). Its parent must
// exist in the sandbox; it should lie outside the workspace.
func WithEditDir(dir string) Option { return func(c *config) { c.editDir = dir } }

// WithLogger sets where failures to keep or drop the sandbox copies of
// prepared edits are logged (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Tools returns ast_grep, ast_edit and resolve over eng, and a function to
// call when a run ends (it drops the run's prepared edits and the sandbox
// copies of those this instance prepared; others' copies are refused to
// other runs and removed when found expired).
func Tools(eng *engine.Engine, opts ...Option) ([]tools.Tool, func(runID string)) {
	c := &config{eng: eng, maxFileSize: 1 << 20, maxFiles: 200000, maxPreview: 48 << 10, now: time.Now,
		editDir: DefaultEditDir, log: slog.New(slog.DiscardHandler)}
	c.store = newStore()
	for _, o := range opts {
		o(c)
	}
	return []tools.Tool{&grepTool{c}, &editTool{c}, &resolveTool{c}}, c.dropRun
}

// dropRun forgets a run's prepared edits and removes their sandbox copies,
// all within one copyTimeout (a stuck sandbox must not hold the run's end).
func (c *config) dropRun(runID string) {
	dropped := c.store.dropRun(runID)
	if len(dropped) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), copyTimeout)
	defer cancel()
	for _, p := range dropped {
		c.removeCopy(ctx, p.conn, p.id)
	}
}

var (
	_ tools.Tool = (*grepTool)(nil)
	_ tools.Tool = (*editTool)(nil)
	_ tools.Tool = (*resolveTool)(nil)
)

func available(env *tools.Env) bool { return tools.HasSandbox(env) }

// Why (tools.Explainer): the engine is wired, so only the sandbox can be missing.
func (t *grepTool) Why(env *tools.Env) string    { return tools.WhyNoSandbox(env) }
func (t *editTool) Why(env *tools.Env) string    { return tools.WhyNoSandbox(env) }
func (t *resolveTool) Why(env *tools.Env) string { return tools.WhyNoSandbox(env) }

func connect(ctx context.Context, env *tools.Env) (*tools.SandboxConn, *tools.Result, error) {
	return tools.Open(ctx, env)
}

func fail(err error) (tools.Result, error) { return tools.Fail(err) }

// resolvePath maps the path argument to an absolute path inside the
// workspace by the handle's one rule, or returns an error message for the
// model.
// Empty means the workspace.
func resolvePath(_ *tools.Env, conn *tools.SandboxConn, p string) (string, string) {
	if p == "" {
		return conn.Workspace, ""
	}
	abs, err := conn.Resolve("path", p)
	if err != nil {
		return "", err.Error()
	}
	return abs, ""
}

// display shows an absolute sandbox path relative to the workdir when it
// lies below it, and the workdir itself by its full path.
func display(_ *tools.Env, conn *tools.SandboxConn, abs string) string {
	if r := conn.Rel(abs); r != "." {
		return r
	}
	return abs
}
