package audit

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

type requestKey struct{}

// Request is what the API knows of one HTTP request, carried in its
// context for the records made while it runs: the tool calls read it, and
// the API's own record of the request is made from it at the end.
type Request struct {
	ID      string // the request id
	TokenID string // TokenID of its bearer token

	mu           sync.Mutex // guards what follows: set by handlers, read by records
	route        string
	tenant       string
	run          string
	conversation string
	sandbox      string
	toolRecords  int
}

// WithRequest returns ctx carrying r.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the Request ctx carries, or nil.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// SetRoute notes the route pattern that matched. r may be nil.
func (r *Request) SetRoute(route string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.route = route
	r.mu.Unlock()
}

// SetTenant notes the tenant the request authenticated as. r may be nil.
func (r *Request) SetTenant(tenant string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.tenant = tenant
	r.mu.Unlock()
}

// SetRun notes the run, conversation and sandbox the request acts on (""
// leaves a value as it is). r may be nil.
func (r *Request) SetRun(run, conversation, sandbox string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if run != "" {
		r.run = run
	}
	if conversation != "" {
		r.conversation = conversation
	}
	if sandbox != "" {
		r.sandbox = sandbox
	}
}

// ToolRecords is how many tool calls were recorded during the request.
func (r *Request) ToolRecords() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.toolRecords
}

// Fill completes rec with what the request knows: tenant, token, ids.
func (r *Request) Fill(rec *Record) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.RequestID, rec.TokenID = r.ID, r.TokenID
	if rec.Tenant == "" {
		rec.Tenant = r.tenant
	}
	if rec.Run == "" {
		rec.Run = r.run
	}
	if rec.Conversation == "" {
		rec.Conversation = r.conversation
	}
	if rec.Sandbox == "" {
		rec.Sandbox = r.sandbox
	}
}

// Recorder records every tool call of a registry in a Log: it is the
// registry's CallAuditor. A write or exec call's answer waits until its
// record is on disk (at most the Log's DurableWait); a read call's record
// is buffered. It starts no goroutines.
type Recorder struct{ log *Log }

// NewRecorder records calls in l.
func NewRecorder(l *Log) *Recorder { return &Recorder{log: l} }

var (
	_ tools.CallObserver = (*Recorder)(nil)
	_ tools.CallAuditor  = (*Recorder)(nil)
)

// ObserveToolCall does nothing: the Recorder needs the whole record.
func (*Recorder) ObserveToolCall(string, tools.Level, string, time.Duration) {}

// AuditToolCall appends the call's record, waiting for the disk for a
// write or exec call. Errors are counted and logged by the Log; the call's
// answer still goes out (the call has run by now).
func (rc *Recorder) AuditToolCall(ctx context.Context, c tools.CallRecord) {
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	rec := Record{Time: c.Started, Kind: KindTool, Action: c.Tool, Level: string(c.Level),
		ArgsSHA256: Digest(args), ArgsBytes: int64(len(args)), Outcome: c.Outcome,
		DurationMS: MS(c.Duration), Approval: c.Approval}
	if c.Run != nil {
		rec.Tenant, rec.Run, rec.Conversation = c.Run.Tenant, c.Run.ID, c.Run.Conversation
	}
	if req := RequestFrom(ctx); req != nil {
		req.Fill(&rec)
		req.mu.Lock()
		rec.Route = req.route
		req.toolRecords++
		req.mu.Unlock()
	}
	durable := c.Level == tools.LevelWrite || c.Level == tools.LevelExec
	if err := rc.log.Append(rec, durable); err != nil {
		rc.log.log.Warn("a tool call's audit record was not written", "tool", c.Tool, "run", rec.Run, "err", err)
	}
}
