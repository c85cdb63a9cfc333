package containerd

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
)

// engineErr classifies a containerd error. NotFound is left to callers,
// which know what was not found.
func engineErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.DeadlineExceeded("containerd did not %s in time; retry", op)
	case errors.Is(err, context.Canceled):
		return errdefs.Unavailable("the request was cancelled while containerd was asked to %s", op)
	case unreachable(err):
		return errdefs.Unavailable("containerd cannot be reached to %s (%v); start it or check containerd.address, then retry", op, err)
	case cerrdefs.IsNotFound(err):
		return errdefs.NotFound("containerd could not %s: %v", op, err)
	case cerrdefs.IsInvalidArgument(err):
		return errdefs.InvalidArgument("containerd refused to %s: %v", op, err)
	case cerrdefs.IsAlreadyExists(err), cerrdefs.IsConflict(err):
		return errdefs.Conflict("containerd could not %s because of a conflict: %v; retry", op, err)
	case cerrdefs.IsFailedPrecondition(err):
		return errdefs.FailedPrecondition("containerd could not %s: %v", op, err)
	}
	return errdefs.Internal("containerd failed to %s: %v", op, err)
}

// unreachable tells a missing or restarting containerd from a containerd
// error; gRPC reports a dead socket as Unavailable.
func unreachable(err error) bool {
	var ne net.Error
	return cerrdefs.IsUnavailable(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne)
}
