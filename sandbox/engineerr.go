package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Engine names a container engine in the error messages its errors become.
type Engine struct {
	Name string // "the Docker engine", "containerd"
	Hint string // what to check when it cannot be reached, e.g. "DOCKER_HOST"
	// Unreachable, when set, recognises the engine client's own "cannot
	// connect" errors besides the socket errors every client shares.
	Unreachable func(error) bool
}

// Err classifies an engine error into an errdefs class with one error message
// saying what failed and what to do. NotFound keeps the engine's words;
// callers that know what was not found say it better.
func (e Engine) Err(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.DeadlineExceeded("%s did not %s in time; retry", e.Name, op)
	case errors.Is(err, context.Canceled):
		return errdefs.Unavailable("the request was cancelled while %s was asked to %s", e.Name, op)
	case e.unreachable(err):
		return errdefs.Unavailable("%s cannot be reached to %s (%v); start it or check %s, then retry", e.Name, op, err, e.Hint)
	case cerrdefs.IsNotFound(err):
		return errdefs.NotFound("%s could not %s: %v", e.Name, op, err)
	case cerrdefs.IsInvalidArgument(err):
		return errdefs.InvalidArgument("%s refused to %s: %v", e.Name, op, err)
	case cerrdefs.IsAlreadyExists(err), cerrdefs.IsConflict(err):
		return errdefs.Conflict("%s could not %s because of a conflict: %v; retry", e.Name, op, err)
	case cerrdefs.IsFailedPrecondition(err):
		return errdefs.FailedPrecondition("%s could not %s: %v", e.Name, op, err)
	case cerrdefs.IsUnavailable(err):
		return errdefs.Unavailable("%s could not %s now: %v; retry", e.Name, op, err)
	}
	return errdefs.Internal("%s failed to %s: %v", e.Name, op, err)
}

// unreachable tells a missing or restarting engine from an engine error.
func (e Engine) unreachable(err error) bool {
	var ne net.Error
	return (e.Unreachable != nil && e.Unreachable(err)) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne)
}
