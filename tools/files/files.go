// Package files holds the file tools: read, write, edit, apply_patch and
// shell (DESIGN.md §4 "File tools"). They register when the conversation has
// a sandbox and reach it only through the sandbox agent, which confines every
// path to the workspace; the tools also check paths lexically first, so that
// the common mistake gets an error message that names the run's workdir.
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
	fileTimeout    time.Duration // deadline of one call's file operations in the sandbox
	procMax        int           // processes running at once per sandbox (0: the agent's default)
	procRing       int64         // output kept per process (0: the agent's default)
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

// WithReadOutputBytes caps one read result (256 KiB); read stops at a line
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

// WithFileTimeout sets the deadline of the file operations of one read,
// write, edit or apply_patch call (60 s). A call whose sandbox does not
// respond (a stuck file system, a frozen container) ends then with an
// error message, and so frees the conversation's queue for the calls behind
// it.
func WithFileTimeout(d time.Duration) Option { return func(c *config) { c.fileTimeout = d } }

// WithProcesses sets the process tool's limit of processes running at once
// in a sandbox and the output kept per process (0: the agent's defaults, 32
// and 4 MiB).
func WithProcesses(maxRunning int, ringBytes int64) Option {
	return func(c *config) { c.procMax, c.procRing = maxRunning, ringBytes }
}

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
		fileTimeout:    60 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Tools returns read, write, edit, apply_patch, shell and process, in that
// order.
func Tools(opts ...Option) []tools.Tool {
	c := newConfig(opts)
	return []tools.Tool{&readTool{c}, &writeTool{c}, &editTool{c}, &patchTool{c}, &shellTool{c}, &processTool{c: c}}
}

var (
	_ tools.Tool = (*readTool)(nil)
	_ tools.Tool = (*writeTool)(nil)
	_ tools.Tool = (*editTool)(nil)
	_ tools.Tool = (*patchTool)(nil)
	_ tools.Tool = (*shellTool)(nil)
)

func available(env *tools.Env) bool { return tools.HasSandbox(env) }

// Why (tools.Explainer): every file tool stands on the sandbox.
func (t *readTool) Why(env *tools.Env) string  { return tools.WhyNoSandbox(env) }
func (t *writeTool) Why(env *tools.Env) string { return tools.WhyNoSandbox(env) }
func (t *editTool) Why(env *tools.Env) string  { return tools.WhyNoSandbox(env) }
func (t *patchTool) Why(env *tools.Env) string { return tools.WhyNoSandbox(env) }
func (t *shellTool) Why(env *tools.Env) string { return tools.WhyNoSandbox(env) }

func connect(ctx context.Context, env *tools.Env) (*tools.SandboxConn, *tools.Result, error) {
	return tools.Open(ctx, env)
}

func fail(err error) (tools.Result, error) { return tools.Fail(err) }

// afterWrite runs the diagnostics hook, if any, and appends its blocks.
func afterWrite(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, res tools.Result, paths []string) tools.Result {
	if env.AfterWrite == nil || len(paths) == 0 {
		return res
	}
	res.Content = append(res.Content, env.AfterWrite(ctx, conn, paths)...)
	return res
}

// fileCtx bounds a call's file operations by the file timeout; the
// diagnostics after a write keep the call's own context.
func (c *config) fileCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.fileTimeout)
}

// failFile is fail for an error of a file operation made under fctx: when
// the file timeout (not the caller) ended it, the error message says so
// and what became of the call.
func (c *config) failFile(ctx, fctx context.Context, err error, what, outcome string) (tools.Result, error) {
	if errors.Is(err, errdefs.ErrDeadlineExceeded) && fileTimedOut(ctx, fctx) {
		return tools.ErrorFrom(errdefs.DeadlineExceeded("%s did not finish within %s: the sandbox did not answer (its file system or container may be stuck); %s", what, c.fileTimeout, outcome)), nil
	}
	return fail(err)
}

// fileTimedOut reports whether fctx's file timeout, not the caller's
// context, ended the operation. The deadline is compared rather than
// fctx.Err() read: the agent's stream deadline may fire a moment before
// the context's timer does.
func fileTimedOut(ctx, fctx context.Context) bool {
	dl, ok := fctx.Deadline()
	return ok && !time.Now().Before(dl) && ctx.Err() == nil
}
