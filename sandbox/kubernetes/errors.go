package kubernetes

import (
	"context"
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sandboxd/sandboxd/errdefs"
)

// apiErr classifies an API server error. NotFound is left to callers, which
// know what was not found.
func apiErr(op string, err error) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.DeadlineExceeded("the Kubernetes API server did not %s in time; retry", op)
	case errors.Is(err, context.Canceled):
		return errdefs.Unavailable("the request was cancelled while the Kubernetes API server was asked to %s", op)
	case apierrors.IsNotFound(err):
		return errdefs.NotFound("the Kubernetes API server could not %s: %v", op, err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return errdefs.FailedPrecondition("sandboxd may not %s: %v; grant its service account the RBAC rules of the Helm chart", op, err)
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		return errdefs.Conflict("the Kubernetes API server could not %s because of a conflict: %v; retry", op, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return errdefs.InvalidArgument("the Kubernetes API server refused to %s: %v", op, err)
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err):
		return errdefs.Unavailable("the Kubernetes API server could not %s now: %v; retry", op, err)
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &ne):
		return errdefs.Unavailable("the Kubernetes API server cannot be reached to %s (%v); check the kubeconfig and that the cluster is up, then retry", op, err)
	}
	return errdefs.Internal("the Kubernetes API server failed to %s: %v", op, err)
}
