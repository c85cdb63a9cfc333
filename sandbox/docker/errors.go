package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/errdefs"
)

// engineErr classifies an engine error. NotFound is left to callers, which
// know what was not found.
func engineErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.DeadlineExceeded("the Docker engine did not %s in time; retry", op)
	case errors.Is(err, context.Canceled):
		return errdefs.Unavailable("the request was cancelled while the Docker engine was asked to %s", op)
	case unreachable(err):
		return errdefs.Unavailable("the Docker engine cannot be reached to %s (%v); start it or check DOCKER_HOST, then retry", op, err)
	case cerrdefs.IsNotFound(err):
		return errdefs.NotFound("the Docker engine could not %s: %v", op, err)
	case cerrdefs.IsInvalidArgument(err):
		return errdefs.InvalidArgument("the Docker engine refused to %s: %v", op, err)
	case cerrdefs.IsConflict(err):
		return errdefs.Conflict("the Docker engine could not %s because of a conflict: %v; retry", op, err)
	case cerrdefs.IsUnavailable(err):
		return errdefs.Unavailable("the Docker engine could not %s now: %v; retry", op, err)
	}
	return errdefs.Internal("the Docker engine failed to %s: %v", op, err)
}

// unreachable tells a missing or restarting engine from an engine error.
func unreachable(err error) bool {
	var ne net.Error
	return client.IsErrConnectionFailed(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne)
}
