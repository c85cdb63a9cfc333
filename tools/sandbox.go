package tools

import (
	"context"
	"errors"

	"github.com/sandboxd/sandboxd/errdefs"
)

// HasSandbox is the registration condition of every tool that stands on
// the conversation's sandbox.
func HasSandbox(env *Env) bool { return env != nil && env.HasSandbox }

// Connect returns the conversation's sandbox for a call. When there is none
// to use (it vanished, or is stopped) it returns a Result for the model
// instead; a Go error means sandboxd itself failed.
func Connect(ctx context.Context, env *Env) (*SandboxConn, *Result, error) {
	if env == nil || env.Sandbox == nil {
		return nil, nil, errors.New("the run has no sandbox accessor wired")
	}
	conn, err := env.Sandbox(ctx)
	if err != nil {
		if r, ok := ModelError(&unusableSandbox{err}); ok {
			return nil, &r, nil
		}
		return nil, nil, err
	}
	if conn == nil || conn.Agent == nil || conn.Workspace == "" {
		return nil, nil, errors.New("the sandbox connection is incomplete (no agent or workspace)")
	}
	return conn, nil, nil
}

// modelClasses are the error classes whose sentence the model can act on:
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
