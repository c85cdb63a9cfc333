// Package files holds the file tools: read, write, edit, apply_patch and
// shell (DESIGN.md §4 "File tools"). They register when the conversation has
// a sandbox and reach it only through the sandbox agent, which confines every
// path to the workspace; the tools also check paths lexically first, so that
// the common mistake gets a sentence that names the run's workdir.
package files

import (
	"context"
	"errors"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// config holds the caps every file tool shares.
type config struct {
	readLines      int           // default line limit of read
	maxLineChars   int           // a longer line is cut in read's output
	readOutput     int           // bytes of read output before it stops early
	maxFileBytes   int64         // largest file read, edit and apply_patch load
	shellDefault   time.Duration // shell timeout when none is given
	shellMax       time.Duration // largest timeout_s accepted
	shellOutput    int           // bytes kept of each of stdout and stderr
	patchFuzzLines int           // how far a hunk may have moved from its stated line
	// beforeWrite runs between the read and the write of edit and
	// apply_patch; tests use it to change a file in that window.
	beforeWrite func()
}

// Option changes a cap of the file tools.
type Option func(*config)

// WithReadLimit sets read's default number of lines (2000).
func WithReadLimit(lines int) Option { return func(c *config) { c.readLines = lines } }

// WithMaxLineChars sets where read cuts a long line (2000 characters).
func WithMaxLineChars(n int) Option { return func(c *config) { c.maxLineChars = n } }

// WithReadOutputBytes caps one read answer (256 KiB); read stops at a line
// boundary and says how to continue.
func WithReadOutputBytes(n int) Option { return func(c *config) { c.readOutput = n } }

// WithMaxFileBytes caps the files that read, edit and apply_patch load (16 MiB).
func WithMaxFileBytes(n int64) Option { return func(c *config) { c.maxFileBytes = n } }

// WithShellTimeouts sets shell's default and largest timeout (120 s, 600 s).
func WithShellTimeouts(def, max time.Duration) Option {
	return func(c *config) { c.shellDefault, c.shellMax = def, max }
}

// WithShellOutputBytes caps each of shell's stdout and stderr (32 KiB; half
// from the head, half from the tail).
func WithShellOutputBytes(n int) Option { return func(c *config) { c.shellOutput = n } }

// WithPatchFuzz sets how many lines away from its stated position a hunk may
// be found (50). Content is never fuzzed.
func WithPatchFuzz(lines int) Option { return func(c *config) { c.patchFuzzLines = lines } }

func newConfig(opts []Option) *config {
	c := &config{
		readLines:      2000,
		maxLineChars:   2000,
		readOutput:     256 << 10,
		maxFileBytes:   16 << 20,
		shellDefault:   120 * time.Second,
		shellMax:       600 * time.Second,
		shellOutput:    32 << 10,
		patchFuzzLines: 50,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Tools returns read, write, edit, apply_patch and shell, in that order.
func Tools(opts ...Option) []tools.Tool {
	c := newConfig(opts)
	return []tools.Tool{&readTool{c}, &writeTool{c}, &editTool{c}, &patchTool{c}, &shellTool{c}}
}

var (
	_ tools.Tool = (*readTool)(nil)
	_ tools.Tool = (*writeTool)(nil)
	_ tools.Tool = (*editTool)(nil)
	_ tools.Tool = (*patchTool)(nil)
	_ tools.Tool = (*shellTool)(nil)
)

// available is the registration condition shared by all file tools.
func available(env *tools.Env) bool { return env != nil && env.HasSandbox }

// connect returns the conversation's sandbox, or a result for the model when
// there is none to use (it vanished, or is stopped).
func connect(ctx context.Context, env *tools.Env) (*tools.SandboxConn, *tools.Result, error) {
	if env == nil || env.Sandbox == nil {
		return nil, nil, errors.New("the run has no sandbox accessor wired")
	}
	conn, err := env.Sandbox(ctx)
	if err != nil {
		if r, ok := modelError(err); ok {
			return nil, &r, nil
		}
		return nil, nil, err
	}
	if conn == nil || conn.Agent == nil || conn.Workspace == "" {
		return nil, nil, errors.New("the sandbox connection is incomplete (no agent or workspace)")
	}
	return conn, nil, nil
}

// modelError turns errors that the model can act on (a bad path, a missing
// file, a file that changed) into an is_error result; failures of sandboxd
// itself stay Go errors so the registry logs them.
func modelError(err error) (tools.Result, bool) {
	for _, class := range []error{
		errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrFailedPrecondition,
		errdefs.ErrConflict, errdefs.ErrResourceExhausted, errdefs.ErrUnavailable,
		errdefs.ErrDeadlineExceeded,
	} {
		if errors.Is(err, class) {
			return tools.Error(err.Error()), true
		}
	}
	return tools.Result{}, false
}

// fail converts an agent error into the (Result, error) pair a tool returns.
func fail(err error) (tools.Result, error) {
	if r, ok := modelError(err); ok {
		return r, nil
	}
	return tools.Result{}, err
}

// afterWrite runs the diagnostics hook, if any, and appends its blocks.
func afterWrite(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, res tools.Result, paths []string) tools.Result {
	if env.AfterWrite == nil || len(paths) == 0 {
		return res
	}
	res.Content = append(res.Content, env.AfterWrite(ctx, conn, paths)...)
	return res
}
