package tools

import (
	"context"
	"errors"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// HasSandbox is the registration condition of every tool that stands on
// the conversation's sandbox.
func HasSandbox(env *Env) bool { return env != nil && env.HasSandbox }

// DocumentedWorkspace is the workspace root as runs and the model name it;
// a sandbox whose workspace lies elsewhere (a host folder on the host
// backend) has it mapped onto its own root.
const DocumentedWorkspace = "/workspace"

// Open returns the one handle a call has on the conversation's sandbox:
// its agent, workspace and the run's working directory in it, with Resolve
// and Rel to confine and show paths. When there is none to use (it
// vanished, or is stopped or paused) it returns the Result the model reads
// instead; a Go error means sandboxd itself failed.
//
// It is the only way a tool reaches the sandbox, so every family words a
// vanished sandbox the same and counts it as sandboxd's failure, never as
// an internal error.
func Open(ctx context.Context, env *Env) (*SandboxConn, *Result, error) {
	if env == nil || env.Sandbox == nil {
		return nil, nil, errors.New("the run has no sandbox accessor wired")
	}
	conn, err := env.Sandbox(ctx)
	if err != nil {
		r, gerr := SandboxFail(err)
		if gerr != nil {
			return nil, nil, gerr
		}
		return nil, &r, nil
	}
	if conn == nil || conn.Workspace == "" {
		return nil, nil, errors.New("the sandbox connection is incomplete (no workspace)")
	}
	c := *conn
	c.Workspace = path.Clean(c.Workspace)
	wd := ""
	if env.Run != nil {
		wd = env.Run.Workdir
	}
	c.Workdir = Workdir(c.Workspace, wd)
	return &c, nil, nil
}

// Deref returns *r, or an empty Result when r is nil: what a call returns,
// beside the error, when Open gave it no handle.
func Deref(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}

// SandboxFail is Fail for an error met while reaching the conversation's
// sandbox (from Env.Sandbox, or an agent call that found it gone): the
// model reads the error message, and the call counts as failed for want of its
// sandbox whatever the error's class. A Go error is returned only for an
// error of no known class, sandboxd's own.
func SandboxFail(err error) (Result, error) {
	if r, ok := ModelError(&unusableSandbox{err}); ok {
		return r, nil
	}
	return Result{}, err
}

// Gone reports whether err says the conversation's sandbox no longer
// exists (removed, or being removed): errdefs.ErrNotFound from the sandbox
// manager.
func Gone(err error) bool { return errors.Is(err, errdefs.ErrNotFound) }

// Workdir is the run's working directory inside a sandbox whose workspace
// root is workspace: "" is the root; a relative one is taken from it; the
// documented /workspace (or a path under it) is mapped onto the root when
// the root lies elsewhere; an absolute one outside the workspace (a run
// made for an earlier sandbox with another root) falls back to the root,
// so no tool ever starts outside it.
func Workdir(workspace, workdir string) string {
	ws := path.Clean(workspace)
	switch {
	case workdir == "":
		return ws
	case !path.IsAbs(workdir):
		return path.Join(ws, workdir)
	}
	wd := path.Clean(workdir)
	if ws != DocumentedWorkspace {
		if wd == DocumentedWorkspace {
			return ws
		}
		if rest, ok := strings.CutPrefix(wd, DocumentedWorkspace+"/"); ok {
			return path.Join(ws, rest)
		}
	}
	if Within(ws, wd) {
		return wd
	}
	return ws
}

// Within reports whether p is root or lies below it; both are clean and
// absolute.
func Within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// Resolve maps a path argument (named arg in the error message: "path",
// "file", "workdir") to an absolute path inside the workspace, lexically:
// a relative path is taken from the workdir, an absolute one must lie
// inside the workspace. Symlinks are the agent's to judge, since only it
// sees them. A path the model must change is errdefs.ErrInvalidArgument
// with one error message saying what is wrong and what to give.
func (c *SandboxConn) Resolve(arg, p string) (string, error) {
	ws, wd := c.Workspace, c.Workdir
	if wd == "" {
		wd = ws
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.InvalidArgument("%s %q contains a NUL byte; give a plain path inside the workspace %s", arg, p, ws)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", errdefs.InvalidArgument("%s %q uses ~, which is not expanded; give a path relative to the workdir %s or an absolute path inside the workspace %s", arg, p, wd, ws)
	}
	abs := c.Abs(p)
	if Within(ws, abs) {
		return abs, nil
	}
	switch {
	case path.IsAbs(p):
		return "", errdefs.InvalidArgument("%s %q is outside the workspace %s; give a path inside it", arg, p, ws)
	case wd == ws:
		return "", errdefs.InvalidArgument("%s %q leaves the workspace %s: it resolves to %s, which is outside the workspace; give a path inside the workspace", arg, p, ws, abs)
	}
	return "", errdefs.InvalidArgument("%s %q leaves the workspace %s: from the workdir %s it resolves to %s, which is outside the workspace; give a path inside the workspace", arg, p, ws, wd, abs)
}

// Abs is p made absolute against the workdir, without confinement: for
// what the agent itself runs or reports, never for a path to read or
// write on the model's word.
func (c *SandboxConn) Abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	wd := c.Workdir
	if wd == "" {
		wd = c.Workspace
	}
	return path.Join(wd, p)
}

// Rel shows an absolute sandbox path as the model would give it: relative
// to the workdir when it lies below it ("." for the workdir itself), else
// absolute (a path elsewhere in the workspace, or a library's source).
func (c *SandboxConn) Rel(abs string) string {
	wd := c.Workdir
	if wd == "" {
		wd = c.Workspace
	}
	switch {
	case abs == wd:
		return "."
	case wd == "/" && strings.HasPrefix(abs, "/"):
		return abs[1:]
	case strings.HasPrefix(abs, wd+"/"):
		return abs[len(wd)+1:]
	}
	return abs
}

// modelClasses are the error classes whose error message the model can act on:
// a bad path, a missing file, a file that changed, a sandbox that is gone.
var modelClasses = []error{
	errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrFailedPrecondition,
	errdefs.ErrConflict, errdefs.ErrResourceExhausted, errdefs.ErrUnavailable,
	errdefs.ErrDeadlineExceeded,
}

// ModelError turns an error the model can act on into an is_error result;
// failures of sandboxd itself are not, so the registry logs them. The
// result keeps err (ErrorFrom), so an unavailable agent or engine still
// counts as sandboxd's failure in the call's outcome.
func ModelError(err error) (Result, bool) {
	for _, class := range modelClasses {
		if errors.Is(err, class) {
			return ErrorFrom(err), true
		}
	}
	return Result{}, false
}

// Fail is what a tool returns for err: an is_error result when the model
// can act on it, else the error itself.
func Fail(err error) (Result, error) {
	if r, ok := ModelError(err); ok {
		return r, nil
	}
	return Result{}, err
}
