package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sandboxd/sandboxd/errdefs"
)

// StatusOf is the one place where an error class becomes an HTTP status.
func StatusOf(err error) int {
	switch errdefs.Code(err) {
	case "invalid_argument":
		return http.StatusBadRequest
	case "unauthenticated":
		return http.StatusUnauthorized
	case "not_found":
		return http.StatusNotFound
	case "conflict":
		return http.StatusConflict
	case "failed_precondition":
		return http.StatusPreconditionFailed
	case "resource_exhausted":
		return http.StatusTooManyRequests
	case "unavailable":
		return http.StatusServiceUnavailable
	case "deadline_exceeded":
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeError answers with err's status and the error body. Internal errors
// are logged with the request id so an operator can find the cause.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status := StatusOf(err)
	code := errdefs.Code(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		log.ErrorContext(r.Context(), "internal error", "request_id", requestID(r.Context()), "err", err)
	}
	if errors.Is(err, errdefs.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a bug gets here: every answer type marshals.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"the answer could not be encoded; this is a bug in sandboxd"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
