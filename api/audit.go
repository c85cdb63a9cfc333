package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Audit is what the API needs of the audit record (audit.Log): it appends
// one record per request, and answers GET /v1/audit from this replica's
// files.
type Audit interface {
	Append(rec audit.Record, durable bool) error
	Query(q audit.Query) (audit.Page, error)
}

var _ Audit = (*audit.Log)(nil)

// WithAudit records every request in a (and serves GET /v1/audit from
// it). Without it nothing is recorded and the route responds 503.
func WithAudit(a Audit) Option { return func(s *Server) { s.audit = a } }

// WithAuditAll names the tenant whose GET /v1/audit sees every tenant's
// records: the admin token's, when no tenants are configured ("": none).
func WithAuditAll(tenant string) Option { return func(s *Server) { s.auditAll = tenant } }

// AuditPage is the answer to GET /v1/audit.
type AuditPage struct {
	// Records, oldest first (by seq).
	Records []audit.Record `json:"records"`
	// Next is the cursor of the next page; absent on the last.
	Next string `json:"next,omitempty"`
	// Unreached names the replicas whose records this page lacks because
	// they did not answer; absent when every replica did (and without
	// replicas).
	Unreached []string `json:"unreached,omitempty"`
}

// callToolRoute is the route whose one tool call is its record: a request
// that reached the tool registry is recorded as the call (kind "tool"),
// one refused before it (an unknown run, a bad body, a tool the run does
// not see) as the request (kind "api").
const callToolRoute = "POST /v1/runs/{id}/tools/{name}"

// unaudited are the probes and scrapes: no action of anyone's.
var unaudited = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// auditStart begins a request's record: it carries the request's token id
// in its context, and hashes the body as the handler reads it.
func (s *Server) auditStart(r *http.Request, id string) (*http.Request, *audit.Request, *hashBody) {
	if s.audit == nil {
		return r, nil, nil
	}
	ar := &audit.Request{ID: id}
	if tok, ok := BearerToken(r); ok {
		ar.TokenID = audit.TokenID(tok)
	}
	r = r.WithContext(audit.WithRequest(r.Context(), ar))
	var hb *hashBody
	if r.Body != nil && r.Body != http.NoBody {
		hb = &hashBody{ReadCloser: r.Body, h: sha256.New()}
		r.Body = hb
	}
	return r, ar, hb
}

// auditEnd appends the request's record, unless it is a probe, or a tool
// call recorded as the call.
func (s *Server) auditEnd(r *http.Request, ar *audit.Request, hb *hashBody, route string, start time.Time, status int, code string, d time.Duration) {
	if ar == nil || unaudited[route] || route == callToolRoute && ar.ToolRecords() > 0 {
		return
	}
	rec := audit.Record{Time: start, Kind: audit.KindAPI, Tenant: tenantOf(r.Context()), Action: route, Status: status,
		Outcome: outcomeOf(code, status), DurationMS: audit.MS(d)}
	if hb != nil && hb.n > 0 {
		rec.ArgsSHA256, rec.ArgsBytes = hex.EncodeToString(hb.h.Sum(nil)), hb.n
	}
	_, path, _ := strings.Cut(route, " ")
	switch {
	case strings.HasPrefix(path, "/v1/sandboxes/{id}"):
		rec.Sandbox = r.PathValue("id")
	case strings.HasPrefix(path, "/v1/runs/{id}"):
		rec.Run = r.PathValue("id")
	}
	ar.Fill(&rec)
	// Buffered: an API record waits at most the queue's short wait, and a
	// drop is counted and logged by the record itself.
	s.audit.Append(rec, false)
}

// outcomeOf is a request's outcome class: "ok" below 400, else the error
// class it answered with, or the class its status stands for.
func outcomeOf(code string, status int) string {
	switch {
	case status < 400:
		return "ok"
	case code != "":
		return code
	}
	if c := errdefs.CodeOfStatus(status); c != "" {
		return c
	}
	return "http_" + strconv.Itoa(status)
}

// hashBody hashes and counts what the handler reads of a body.
type hashBody struct {
	io.ReadCloser
	h hash.Hash
	n int64
}

func (b *hashBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	return n, err
}

// getAudit serves GET /v1/audit: the tenant's records of this replica,
// oldest first, a page at a time.
func (s *Server) getAudit(w http.ResponseWriter, r *http.Request, tenant string) error {
	if s.audit == nil {
		return errdefs.Unavailable("this sandboxd keeps no audit record (audit.disabled is true in its config); turn it on to query it")
	}
	v := r.URL.Query()
	q := audit.Query{Tenant: tenant, All: s.auditAll != "" && tenant == s.auditAll, Run: v.Get("run"), Sand: v.Get("sandbox")}
	var err error
	if q.Since, err = auditTime(v.Get("since"), "since"); err != nil {
		return err
	}
	if q.Until, err = auditTime(v.Get("until"), "until"); err != nil {
		return err
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return errdefs.InvalidArgument("limit %q is not a number from 1 to %d; leave it out for %d", l, audit.MaxLimit, audit.DefaultLimit)
		}
		q.Limit = n
	}
	if c := v.Get("cursor"); c != "" {
		if q.After, err = parseCursor(c); err != nil {
			return err
		}
	}
	page, err := s.audit.Query(q)
	if err != nil {
		return errdefs.Unavailable("%v", err)
	}
	out := AuditPage{Records: page.Records}
	if page.Next != 0 {
		out.Next = makeCursor(page.Next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func auditTime(s, name string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errdefs.InvalidArgument("%s %q is not a time; give it in RFC 3339, such as 2026-01-02T15:04:05Z", name, s)
	}
	return t, nil
}

// A cursor is the seq of the last record a page held, opaque to callers.
// With replicas the router wraps one per replica in its own cursor.
func makeCursor(seq uint64) string { return AuditCursor(seq) }

// AuditCursor is the cursor that goes on after the record seq of this
// replica's chain.
func AuditCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("a" + strconv.FormatUint(seq, 10)))
}

func parseCursor(c string) (uint64, error) { return ParseAuditCursor(c) }

// ParseAuditCursor reads a cursor AuditCursor made; an error says, in a
// sentence, that it is not one.
func ParseAuditCursor(c string) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 1 && b[0] == 'a' {
		if n, err := strconv.ParseUint(string(b[1:]), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, errdefs.InvalidArgument("cursor %q is not one this API gave; pass the next value of the page before unchanged, or leave cursor out for the first page", c)
}
