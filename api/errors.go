package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

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

// writeError responds with err's status and the error body. Internal errors
// are logged with the request id so an operator can find the cause.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status := StatusOf(err)
	code := errdefs.Code(err)
	msg := err.Error()
	if ri, _ := r.Context().Value(reqInfoKey).(*reqInfo); ri != nil {
		ri.mu.Lock()
		ri.code = code
		ri.mu.Unlock()
	}
	if status == http.StatusInternalServerError {
		log.ErrorContext(r.Context(), "internal error", "request_id", requestID(r.Context()), "err", err)
	}
	if errors.Is(err, errdefs.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// writeJSON responds with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putAnswerBuf(buf)
	buf.Reset()
	// Encode writes json.Marshal's bytes and a newline.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Only a bug gets here: every response type marshals.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"the answer could not be encoded; this is a bug in sandboxd"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	// A known length spares the response chunked encoding.
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// answerBufs holds the buffers responses are encoded into; buffers that grew
// past maxPooledAnswer are left to the collector rather than kept.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledAnswer = 256 << 10

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledAnswer {
		answerBufs.Put(b)
	}
}
