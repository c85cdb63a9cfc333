// Package errdefs defines the few error classes sandboxd uses everywhere.
//
// Packages wrap one of the sentinel classes with %w and an error message that
// says what was wrong and what to do; only the HTTP edge (package api) maps a
// class to a status code. Classes survive the agent pipe as a Code string.
package errdefs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// The error classes. Their text is the wire code used by the HTTP API.
var (
	ErrInvalidArgument    = errors.New("invalid_argument")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrNotFound           = errors.New("not_found")
	ErrConflict           = errors.New("conflict")
	ErrFailedPrecondition = errors.New("failed_precondition")
	ErrResourceExhausted  = errors.New("resource_exhausted")
	ErrInternal           = errors.New("internal")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline_exceeded")
)

var classes = []error{
	ErrInvalidArgument, ErrUnauthenticated, ErrNotFound, ErrConflict,
	ErrFailedPrecondition, ErrResourceExhausted, ErrInternal, ErrUnavailable,
	ErrDeadlineExceeded,
}

// classed is an error with a class and its own message; Error() returns only
// the message so that the class code does not leak into messages for people.
type classed struct {
	class error
	msg   string
	cause error
}

func (e *classed) Error() string { return e.msg }

func (e *classed) Is(target error) bool { return target == e.class }

func (e *classed) Unwrap() error { return e.cause }

func newf(class error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &classed{class: class, msg: err.Error(), cause: errors.Unwrap(err)}
}

// InvalidArgument reports bad input from the caller.
func InvalidArgument(format string, args ...any) error {
	return newf(ErrInvalidArgument, format, args...)
}

// Unauthenticated reports a missing or unknown token.
func Unauthenticated(format string, args ...any) error {
	return newf(ErrUnauthenticated, format, args...)
}

// NotFound reports an object that does not exist, or that the caller may not see.
func NotFound(format string, args ...any) error { return newf(ErrNotFound, format, args...) }

// Conflict reports a clash with existing state.
func Conflict(format string, args ...any) error { return newf(ErrConflict, format, args...) }

// FailedPrecondition reports an operation that the current state does not allow.
func FailedPrecondition(format string, args ...any) error {
	return newf(ErrFailedPrecondition, format, args...)
}

// ResourceExhausted reports a cap that was hit.
func ResourceExhausted(format string, args ...any) error {
	return newf(ErrResourceExhausted, format, args...)
}

// Internal reports a bug or an unexpected failure.
func Internal(format string, args ...any) error { return newf(ErrInternal, format, args...) }

// Unavailable reports a dependency that cannot be reached now; retrying may help.
func Unavailable(format string, args ...any) error { return newf(ErrUnavailable, format, args...) }

// DeadlineExceeded reports a wait that ran out of time.
func DeadlineExceeded(format string, args ...any) error {
	return newf(ErrDeadlineExceeded, format, args...)
}

// Code returns the wire code of err's class; context errors map to their
// natural classes and anything unclassified is "internal".
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrDeadlineExceeded.Error()
	case errors.Is(err, context.Canceled):
		return ErrUnavailable.Error()
	}
	return ErrInternal.Error()
}

// FromCode rebuilds a classed error from a wire code and a message, for
// errors that crossed the agent pipe or the HTTP API.
func FromCode(code, msg string) error {
	for _, c := range classes {
		if c.Error() == code {
			return &classed{class: c, msg: msg}
		}
	}
	return &classed{class: ErrInternal, msg: msg}
}

// CodeOfStatus is the wire code an HTTP status of sandboxd's API stands
// for (the reverse of the API's one mapping of classes to statuses, with
// the statuses a proxy or the server itself answers), "" for one that
// stands for none: a client's side and the audit record read it the same.
func CodeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "invalid_argument"
	case http.StatusUnauthorized, http.StatusForbidden:
		return "unauthenticated"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusPreconditionFailed:
		return "failed_precondition"
	case http.StatusTooManyRequests:
		return "resource_exhausted"
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return "unavailable"
	case http.StatusGatewayTimeout:
		return "deadline_exceeded"
	}
	return ""
}
