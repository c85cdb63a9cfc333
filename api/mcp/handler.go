// Package mcp serves a run's tools over the Model Context Protocol's
// streamable HTTP transport (revisions 2025-06-18 and 2025-03-26), so an
// MCP harness can use a sandboxd run as its tool server (DESIGN.md §3).
//
// It is a small implementation of its own rather than the SDK's server:
// tools/list must be the run's tool list as it stands at each call (it
// changes when the conversation gets a sandbox), every call must go
// through the API's own call path (levels, approvals, diagnostics on
// write, the eval bridge, argument validation by the registry's schema),
// and the body cap, the error messages and the session table's bounds
// are sandboxd's. The protocol surface is five methods.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Protocol revisions served, newest first: a client asking for another
// gets the newest.
const (
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

var versions = []string{Version20250618, Version20250326}

// HTTP headers of the transport.
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "Mcp-Protocol-Version"
)

// Defaults of the session table (WithSessions).
const (
	DefaultSessionTTL       = time.Hour
	DefaultSessionsPerRun   = 16
	DefaultMaxSessions      = 4096
	DefaultMaxBodyBytes     = 16 << 20
	defaultStreamHeartbeat  = 15 * time.Second
	streamWriteTimeout      = 10 * time.Second
	maxBatch                = 64
	maxCancelledReasonBytes = 1 << 10
)

// Runs is what the endpoint needs of the API, for one tenant's run.
type Runs interface {
	// Live checks that the run exists (errdefs.ErrNotFound when it does
	// not or has ended) and marks it used.
	Live(ctx context.Context, tenant, run string) error
	// Tools lists the run's tools, as GET /v1/runs/{id}/tools does.
	Tools(ctx context.Context, tenant, run string) ([]tools.Spec, error)
	// Call calls one of the run's tools, as POST /v1/runs/{id}/tools/{name}
	// does: a tool the run does not see is errdefs.ErrNotFound, arguments
	// that are not one object errdefs.ErrInvalidArgument.
	Call(ctx context.Context, tenant, run, name string, args json.RawMessage) (tools.Result, error)
}

// Handler serves /v1/runs/{id}/mcp. It starts no goroutines beyond the
// request's own (and, for a streamed response, one per call that ends with
// the call); its sessions live in memory, bounded, and expire unused.
type Handler struct {
	runs      Runs
	readBody  func(w http.ResponseWriter, r *http.Request) ([]byte, error)
	log       *slog.Logger
	sessions  *sessionTable
	heartbeat time.Duration
	version   string
}

// Option configures a Handler.
type Option func(*Handler)

// WithBodyReader reads request bodies (the API's, with its cap and pace);
// its errors are error messages for the client. Default: at most
// DefaultMaxBodyBytes.
func WithBodyReader(f func(w http.ResponseWriter, r *http.Request) ([]byte, error)) Option {
	return func(h *Handler) { h.readBody = f }
}

// WithLogger sets where failures are logged.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithSessions bounds the session table: idle expiry, sessions per run,
// sessions in all. A value <= 0 keeps that default.
func WithSessions(ttl time.Duration, perRun, max int) Option {
	return func(h *Handler) {
		if ttl > 0 {
			h.sessions.ttl = ttl
		}
		if perRun > 0 {
			h.sessions.maxPerRun = perRun
		}
		if max > 0 {
			h.sessions.max = max
		}
	}
}

// WithClock replaces time.Now for session expiry (tests).
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.sessions.now = now } }

// WithHeartbeat sets how often a streamed response that waits for its call
// gets a comment line; <= 0 keeps the default (15 s).
func WithHeartbeat(d time.Duration) Option {
	return func(h *Handler) {
		if d > 0 {
			h.heartbeat = d
		}
	}
}

// NewHandler returns the endpoint over runs.
func NewHandler(runs Runs, opts ...Option) *Handler {
	h := &Handler{
		runs:      runs,
		log:       slog.New(slog.DiscardHandler),
		sessions:  newSessionTable(DefaultSessionTTL, DefaultSessionsPerRun, DefaultMaxSessions, time.Now),
		heartbeat: defaultStreamHeartbeat,
		version:   "dev",
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		h.version = bi.Main.Version
	}
	h.readBody = func(w http.ResponseWriter, r *http.Request) ([]byte, error) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DefaultMaxBodyBytes))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errdefs.InvalidArgument("request body is larger than %d bytes; send a smaller body", DefaultMaxBodyBytes)
		}
		return b, err
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// DropRun ends every session of run (the run ended).
func (h *Handler) DropRun(run string) { h.sessions.dropRun(run) }

// Sessions is the number of sessions held (metrics, tests).
func (h *Handler) Sessions() int { return h.sessions.len() }

// ServeRun serves one request to the tenant's run's endpoint; the caller
// has authenticated the tenant (a run-scoped token for this run counts).
func (h *Handler) ServeRun(w http.ResponseWriter, r *http.Request, tenant, run string) {
	if !sameOrigin(r) {
		writeHTTPError(w, http.StatusForbidden, "the Origin header names another site; MCP requests from a browser must come from this sandboxd's own origin")
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, tenant, run)
	case http.MethodDelete:
		h.delete(w, r, tenant, run)
	default:
		// No server-to-client stream: every response rides on its POST.
		w.Header().Set("Allow", "POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, "this MCP endpoint offers no server stream (GET) and takes POST for messages and DELETE to end a session; "+r.Method+" is not supported")
	}
}

// sameOrigin guards against DNS rebinding (the transport's rule): a
// browser's request must come from the origin it is sent to. Requests
// without Origin (every non-browser client) pass.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// checkRun responds to a run that is gone (404, its sessions dropped) or that
// cannot be looked up; it reports whether the request may go on.
func (h *Handler) checkRun(w http.ResponseWriter, r *http.Request, tenant, run string) bool {
	err := h.runs.Live(r.Context(), tenant, run)
	switch {
	case err == nil:
		return true
	case errors.Is(err, errdefs.ErrNotFound):
		h.sessions.dropRun(run)
		writeHTTPError(w, http.StatusNotFound, err.Error())
	default:
		writeHTTPError(w, statusOf(err), err.Error())
	}
	return false
}

// session finds the request's session, responding 400 (none named) or 404
// (unknown or ended: the client must initialize again) when it cannot.
func (h *Handler) session(w http.ResponseWriter, r *http.Request, tenant, run string) (*session, bool) {
	id := r.Header.Get(HeaderSession)
	if id == "" {
		writeHTTPError(w, http.StatusBadRequest, "this request needs the "+HeaderSession+" header that initialize answered; send initialize first")
		return nil, false
	}
	s, ok := h.sessions.get(id, tenant, run)
	if !ok {
		writeHTTPError(w, http.StatusNotFound, "MCP session "+quoteShort(id)+" does not exist or has ended (deleted, expired or its run ended); send initialize again")
		return nil, false
	}
	if v := r.Header.Get(HeaderProtocol); v != "" && v != s.version {
		if !supported(v) {
			writeHTTPError(w, http.StatusBadRequest, HeaderProtocol+" "+quoteShort(v)+" is not supported; sandboxd speaks "+strings.Join(versions, " and "))
		} else {
			writeHTTPError(w, http.StatusBadRequest, HeaderProtocol+" "+quoteShort(v)+" is not the revision this session negotiated ("+s.version+"); send "+s.version+" or initialize again")
		}
		return nil, false
	}
	return s, true
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, tenant, run string) {
	if !h.checkRun(w, r, tenant, run) {
		return
	}
	s, ok := h.session(w, r, tenant, run)
	if !ok {
		return
	}
	h.sessions.remove(s)
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, tenant, run string) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeHTTPError(w, http.StatusUnsupportedMediaType, "Content-Type "+quoteShort(ct)+" is not JSON; send JSON-RPC messages as application/json")
			return
		}
	}
	sse, ok := answerStream(r.Header.Get("Accept"))
	canSSE := acceptsStream(r.Header.Get("Accept"))
	if !ok {
		writeHTTPError(w, http.StatusNotAcceptable, "the Accept header allows neither application/json nor text/event-stream; accept both, as the MCP transport asks")
		return
	}
	if !h.checkRun(w, r, tenant, run) {
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeInvalidRequest, err.Error()))
		return
	}
	trimmed := strings.TrimSpace(string(body))
	if !json.Valid([]byte(trimmed)) {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeParseError, "the body is not valid JSON; send one JSON-RPC message (an object)"))
		return
	}
	if trimmed[0] == '[' {
		h.batch(w, r, tenant, run, json.RawMessage(trimmed), sse)
		return
	}
	if trimmed[0] != '{' {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeInvalidRequest, "the body is JSON but not a JSON-RPC message; send one object"))
		return
	}
	m, bad := decodeMessage(json.RawMessage(trimmed))
	if bad != nil {
		writeRPC(w, http.StatusBadRequest, bad)
		return
	}
	if m.Method == "initialize" && m.isRequest() {
		h.initialize(w, r, tenant, run, m)
		return
	}
	if m.isRequest() && !served(m.Method) && r.Header.Get(HeaderSession) == "" {
		// A probe before initialize (a newer revision's server/discover)
		// learns that the method is not here and falls back to initialize.
		writeRPC(w, http.StatusOK, h.dispatch(r.Context(), nil, m))
		return
	}
	s, ok := h.session(w, r, tenant, run)
	if !ok {
		return
	}
	if !m.isRequest() {
		h.notice(s, m)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if tok := progressToken(m); tok != nil && m.Method == "tools/call" && canSSE {
		// The call's output goes to the client as progress while it runs,
		// so the response is a stream even for a client that also takes JSON.
		ps := newProgressSink(tok)
		h.streamWith(w, r, ps.out, func(ctx context.Context) any { return h.dispatch(tools.WithOutputSink(ctx, ps), s, m) })
		return
	}
	if sse {
		h.stream(w, r, func(ctx context.Context) any { return h.dispatch(ctx, s, m) })
		return
	}
	writeRPC(w, http.StatusOK, h.dispatch(r.Context(), s, m))
}

// batch handles a JSON array of messages: served (2025-03-26) or refused
// (2025-06-18 dropped batching). Its requests run one after another.
func (h *Handler) batch(w http.ResponseWriter, r *http.Request, tenant, run string, body json.RawMessage, sse bool) {
	s, ok := h.session(w, r, tenant, run)
	if !ok {
		return
	}
	if s.version != Version20250326 {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeInvalidRequest, "this session speaks MCP "+s.version+", which has no batches; send one JSON-RPC message per POST"))
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil || len(raws) == 0 {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeInvalidRequest, "a batch must be a non-empty array of JSON-RPC messages"))
		return
	}
	if len(raws) > maxBatch {
		writeRPC(w, http.StatusBadRequest, errorOf(nil, CodeInvalidRequest, "a batch holds at most 64 messages; send fewer"))
		return
	}
	msgs := make([]*message, len(raws))
	bads := make([]*response, len(raws))
	requests := 0
	for i, raw := range raws {
		msgs[i], bads[i] = decodeMessage(raw)
		if bads[i] != nil || msgs[i].isRequest() {
			requests++
		}
	}
	if requests == 0 {
		for _, m := range msgs {
			h.notice(s, m)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(ctx context.Context) any {
		out := make([]*response, 0, requests)
		for i, m := range msgs {
			switch {
			case bads[i] != nil:
				out = append(out, bads[i])
			case m.isRequest():
				out = append(out, h.dispatch(ctx, s, m))
			default:
				h.notice(s, m)
			}
		}
		return out
	}
	if sse {
		h.stream(w, r, answer)
		return
	}
	writeRPC(w, http.StatusOK, answer(r.Context()))
}

// notice takes a notification or a client's response. The only one acted
// on is notifications/cancelled, which stops the named call.
func (h *Handler) notice(s *session, m *message) {
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) == nil && validID(p.RequestID) {
		h.sessions.cancel(s, idKey(p.RequestID))
	}
}

func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, tenant, run string, m *message) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil || p.ProtocolVersion == "" {
		writeRPC(w, http.StatusOK, errorOf(m.ID, CodeInvalidParams, "initialize needs params with \"protocolVersion\" (sandboxd speaks "+strings.Join(versions, " and ")+")"))
		return
	}
	v := versions[0]
	if supported(p.ProtocolVersion) {
		v = p.ProtocolVersion
	}
	s, err := h.sessions.create(tenant, run, v)
	if err != nil {
		writeRPC(w, statusOf(err), errorOf(m.ID, CodeInternalError, err.Error()))
		return
	}
	w.Header().Set(HeaderSession, s.id)
	writeRPC(w, http.StatusOK, resultOf(m.ID, map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "sandboxd", "version": h.version},
		"instructions": "The tools of sandboxd run " + run + ": they act in the run's conversation's sandbox (files under its workspace, commands, kernels). " +
			"The list can grow once the conversation has a sandbox; list the tools again after creating one.",
	}))
}

// answerStream decides how a POST is responded to: JSON when the client takes
// it, else an SSE stream; ok is false when it takes neither.
func answerStream(accept string) (sse, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return false, true
	}
	jsonOK, sseOK := false, false
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			jsonOK = true
		case "text/event-stream", "text/*":
			sseOK = true
		}
	}
	return !jsonOK && sseOK, jsonOK || sseOK
}

// acceptsStream reports whether accept allows an SSE response at all.
func acceptsStream(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && (mt == "text/event-stream" || mt == "text/*" || mt == "*/*") {
			return true
		}
	}
	return false
}

func supported(v string) bool {
	for _, s := range versions {
		if s == v {
			return true
		}
	}
	return false
}

// idKey is a request id as a map key (its JSON text, so 1 and "1" differ).
func idKey(id json.RawMessage) string { return strings.TrimSpace(string(id)) }

func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// statusOf maps an error class onto the HTTP status the API uses for it.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errdefs.ErrDeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeHTTPError responds to a request the transport refuses before any
// JSON-RPC message is read: the status with a JSON-RPC error without id.
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	writeRPC(w, status, errorOf(nil, CodeInvalidRequest, msg))
}

func writeRPC(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the answer could not be encoded; this is a bug in sandboxd"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
