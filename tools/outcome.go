package tools

import (
	"context"
	"errors"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Outcomes lists every outcome a CallObserver receives, in a fixed order:
// the closed set of the metrics' outcome label.
func Outcomes() []string {
	return []string{OutcomeOK, OutcomeInvalidArguments, OutcomeToolError, OutcomeCanceled, OutcomeFailure}
}

// ErrorFrom is the is_error result carrying err's error message. It keeps err,
// so that the call's outcome follows err's class: a bad path or a missing
// file is the model's to fix (tool_error); an internal error, an
// unavailable agent or engine, or a deadline inside sandboxd is sandboxd's
// own failure, though the model reads the error message either way.
func ErrorFrom(err error) Result {
	r := Error(err.Error())
	r.cause = err
	return r
}

// failureCodes are the errdefs classes of sandboxd's own failures.
var failureCodes = map[string]bool{
	errdefs.ErrInternal.Error():         true,
	errdefs.ErrUnavailable.Error():      true,
	errdefs.ErrDeadlineExceeded.Error(): true,
}

// unusableSandbox marks an error met while reaching the conversation's
// sandbox (removed or stopped outside sandboxd, its agent gone): whatever
// its class, the call failed for want of its sandbox, not by the model.
type unusableSandbox struct{ err error }

func (e *unusableSandbox) Error() string { return e.err.Error() }
func (e *unusableSandbox) Unwrap() error { return e.err }

// resultOutcome classes an is_error result a tool returned without a Go
// error. Only a result made from an error (ErrorFrom) can be a failure; a
// failure while the caller's ctx has ended is counted as canceled, since
// the caller's leaving is the likely cause.
func resultOutcome(ctx context.Context, res Result) string {
	if !res.IsError {
		return OutcomeOK
	}
	if res.cause == nil || !isFailure(res.cause) {
		return OutcomeToolError
	}
	if ctx.Err() != nil {
		return OutcomeCanceled
	}
	return OutcomeFailure
}

func isFailure(err error) bool {
	var u *unusableSandbox
	return errors.As(err, &u) || failureCodes[errdefs.Code(err)]
}
