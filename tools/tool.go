// Package tools holds the tool registry: what each tool is (level,
// parallel-safety, schema), when it registers, and how a call reaches it.
// Each tool family lives in its own sub-package and only implements Tool.
package tools

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// Level says what a tool may do; it decides which surfaces see the tool.
type Level string

const (
	LevelRead  Level = "read"  // no side effects
	LevelWrite Level = "write" // changes files
	LevelExec  Level = "exec"  // starts or controls a process
)

// Surfaces of a run. Plan and readonly runs see read-level tools only.
const (
	SurfaceDefault  = "default"
	SurfacePlan     = "plan"
	SurfaceReadonly = "readonly"
)

// Spec is a tool as the model sees it (DESIGN.md §3 ToolSpec).
type Spec struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Level        Level           `json:"level"`
	ParallelSafe bool            `json:"parallel_safe"`
	InputSchema  json.RawMessage `json:"input_schema"`
}

// Block is one piece of a tool result.
type Block struct {
	Type     string `json:"type"` // "text" or "image"
	Text     string `json:"text,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	Data     string `json:"data,omitempty"` // base64
}

// Result is what a tool call returns to the model.
type Result struct {
	Content []Block `json:"content"`
	IsError bool    `json:"is_error"`
	// ExecutionCount is eval's number of the cell in its kernel (1 for the
	// first cell after a start or reset, failed cells counted, as IPython
	// counts), so a transcript can number cells; 0 from other tools and
	// where no cell ran.
	ExecutionCount int `json:"execution_count,omitempty"`

	// cause is the error an is_error result was made from (ErrorFrom),
	// never sent: its class tells the call's outcome, a model's mistake
	// from sandboxd's own failure.
	cause error
}

// Text joins the result's text blocks with newlines (images left out): what
// a reader of the result sees.
func (r Result) Text() string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Cause is the error an is_error result was made from (ErrorFrom), nil for
// one made from an error message alone: what a tool that got a Result instead
// of a sandbox (Open) asks to tell a vanished sandbox from a stopped one.
func (r Result) Cause() error { return r.cause }

// Text returns a successful result with one text block.
func Text(s string) Result { return Result{Content: []Block{{Type: "text", Text: s}}} }

// Errorf-like helper: an is_error result with one error message for the model.
func Error(s string) Result { return Result{Content: []Block{{Type: "text", Text: s}}, IsError: true} }

// Run is what a tool knows about the run that calls it.
type Run struct {
	ID           string
	Tenant       string
	Conversation string
	Surface      string
	Workdir      string // as given at run creation; "" means the workspace root
	Space        string
	Approval     string // "auto" or "ask"
	Vibe         bool
	Parent       string
}

// SandboxConn is the conversation's sandbox as a tool uses it: the handle
// Open returns, once per call.
type SandboxConn struct {
	ID        string
	Backend   string
	Workspace string // absolute workspace root inside the sandbox
	// Workdir is the run's working directory inside the workspace (see
	// Workdir), set by Open; "" (a handle made by hand) means Workspace.
	Workdir string
	Agent   *agent.Client
}

// Env is what a registration condition and a call can see of the wiring:
// the run, and whether (and how) its conversation has a sandbox.
type Env struct {
	Run *Run
	// HasSandbox is true when the conversation has a live sandbox. It is
	// found from the manager's label map and never creates one.
	HasSandbox bool
	// Sandbox opens (or reuses) the pipe to the conversation's sandbox
	// found when the call's Env was built. It never creates or starts a
	// sandbox; a sandbox that vanished is an errdefs.ErrNotFound error that
	// says so. Tools reach it only through Open.
	Sandbox func(ctx context.Context) (*SandboxConn, error)
	// AfterWrite, when set, is called by write tools with the paths they
	// changed (absolute inside the sandbox); the blocks it returns (new
	// diagnostics) are appended to the tool's result. Diagnostics-on-write
	// plugs in here.
	AfterWrite func(ctx context.Context, conn *SandboxConn, paths []string) []Block
}

// Tool is one tool family member. Call receives arguments already validated
// against Spec().InputSchema; it reports problems the model should read as a
// Result with IsError, and returns a Go error only for failures of sandboxd
// itself (they become an is_error result too, classed and logged).
type Tool interface {
	Spec() Spec
	// Available is the registration condition (DESIGN.md §4 table). It must
	// be cheap and must not start anything.
	Available(env *Env) bool
	Call(ctx context.Context, env *Env, args json.RawMessage) (Result, error)
}

// CallObserver receives one record per finished call (metrics plug in here).
// Outcome is one of Outcomes(): "ok", "invalid_arguments", "tool_error" (an
// is_error result the model can act on: a missing file, a refused
// approval), "canceled" (the caller left) or "failure" (sandboxd's own:
// internal, its sandbox or engine unavailable, a deadline inside it).
type CallObserver interface {
	ObserveToolCall(tool string, level Level, outcome string, d time.Duration)
}

// CallRecorder is an optional capability of a CallObserver, found by type
// assertion: it also gets each finished call's full record (which run, the
// arguments, the result), for the per-run call log. It is called on the
// calling goroutine after the call ended, so it must not block.
type CallRecorder interface {
	RecordToolCall(rec CallRecord)
}

// CallAuditor is an optional capability of a CallObserver, found by type
// assertion: it gets each finished call's record with the call's context
// (the request it came in on), on the calling goroutine before the call
// returns, so the audit record can make the answer wait until the call's
// record is on disk. It may block, each wait bounded by its own deadline.
type CallAuditor interface {
	AuditToolCall(ctx context.Context, rec CallRecord)
}

// CallRecord is one finished call as a CallRecorder sees it.
type CallRecord struct {
	Run      *Run // nil for a call made without a run
	Tool     string
	Level    Level
	Args     json.RawMessage // as the schema normalised them; as sent when they were invalid
	Started  time.Time
	Duration time.Duration
	Outcome  string // one of Outcomes()
	Result   Result // what the call returned; zero for a call that ended in an error
	// Approval is the answer to the permission question the call asked
	// (Approval*); "" when it asked none.
	Approval string
}
