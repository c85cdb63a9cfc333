// Package debug is the debug tool: one Debug Adapter Protocol session per
// conversation, with the adapter (debugpy, delve, lldb, dart) running
// inside the conversation's sandbox as a process of the sandbox agent.
package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// Operations (DESIGN.md §4 debug).
var operations = []string{
	"adapters", "status", "breakpoints", "launch", "attach", "continue", "pause",
	"step_over", "step_in", "step_out", "threads", "stack", "scopes", "variables",
	"evaluate", "output", "terminate",
}

// Tool is the debug tool.
type Tool struct{ sv *Supervisor }

var _ tools.Tool = (*Tool)(nil)

// New returns the debug tool over a supervisor.
func New(sv *Supervisor) *Tool { return &Tool{sv: sv} }

const description = `Debug a program inside the sandbox, as in an editor's debugger: one session per conversation (at most 30 minutes), driven by operation.
Typical flow: adapters (which debuggers work here and why not) -> breakpoints {file, lines} -> launch {program, args} -> read where it stopped -> stack / scopes {frame_id} / variables {reference} / evaluate {expression, frame_id} -> step_over / step_in / step_out / continue -> output -> terminate.
- The debugger is chosen by the program: .py -> debugpy (the project's .venv or venv python first), .go or a Go package directory -> delve, a compiled binary -> lldb (build it with -g), .dart -> dart. Each needs its root marker: pyproject.toml/setup.py/requirements.txt, go.mod, Cargo.toml/CMakeLists.txt, pubspec.yaml.
- Breakpoints may be set before launch; they stay set for the conversation and are sent when a program that can stop there starts (the launch says which were not placed and why). An empty lines list clears the file.
- Every stop says why, file:line, the function, the source line and a frame id. continue/step wait a bounded time; "running" means no stop yet: call status, pause or output.
- Only one session: a second launch or attach is refused; call terminate first.
- attach {port} connects to a Python program started with "python3 -m debugpy --listen 127.0.0.1:PORT --wait-for-client prog.py".`

// Spec is the tool as the model sees it.
func (t *Tool) Spec() tools.Spec {
	ops, _ := json.Marshal(operations)
	return tools.Spec{
		Name:         "debug",
		Description:  description,
		Level:        tools.LevelExec,
		ParallelSafe: false,
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "operation":  {"type": "string", "enum": %s, "description": "What to do; see the tool description."},
    "file":       {"type": "string", "minLength": 1, "description": "breakpoints: the source file, relative to the working directory or absolute."},
    "lines":      {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 2147483647}, "maxItems": 200, "description": "breakpoints: 1-based line numbers; empty clears the file."},
    "program":    {"type": "string", "minLength": 1, "description": "launch: the program (a .py/.go/.dart file, a Go package directory, or a compiled binary)."},
    "args":       {"type": "array", "items": {"type": "string"}, "maxItems": 200, "description": "launch: the program's arguments."},
    "port":       {"type": "integer", "minimum": 1, "maximum": 65535, "description": "attach: the port the debuggee listens on (127.0.0.1 in the sandbox)."},
    "thread_id":  {"type": "integer", "minimum": 0, "maximum": 9007199254740991, "description": "continue/pause/step_*/stack: the thread; default the one that stopped."},
    "frame_id":   {"type": "integer", "minimum": 0, "maximum": 9007199254740991, "description": "scopes (required) / evaluate: a frame id from a stop or stack."},
    "reference":  {"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "variables: a reference from scopes or variables."},
    "expression": {"type": "string", "minLength": 1, "description": "evaluate: the expression, in the program's language."}
  },
  "required": ["operation"],
  "additionalProperties": false
}`, ops)),
	}
}

// Available: debug supervision is wired (the tool is registered), and the
// run has a conversation whose sandbox gives it a working directory.
func (t *Tool) Available(env *tools.Env) bool {
	return env != nil && env.Run != nil && env.Run.Conversation != "" && env.HasSandbox
}

// Why (tools.Explainer): debug sessions live in the conversation's sandbox.
func (t *Tool) Why(env *tools.Env) string {
	if env == nil || env.Run == nil || env.Run.Conversation == "" {
		return "the run has no conversation; create the run with a conversation that has a sandbox"
	}
	return tools.WhyNoSandbox(env)
}

type args struct {
	Operation  string   `json:"operation"`
	File       string   `json:"file"`
	Lines      []int    `json:"lines"`
	Program    string   `json:"program"`
	Args       []string `json:"args"`
	Port       int      `json:"port"`
	ThreadID   *int     `json:"thread_id"`
	FrameID    *int     `json:"frame_id"`
	Reference  int      `json:"reference"`
	Expression string   `json:"expression"`
}

// call is one operation's context.
type call struct {
	sv    *Supervisor
	conn  *tools.SandboxConn
	key   string
	label string
	root  string // the run's working directory inside the sandbox
	a     args

	lldbBT map[int]map[int]string // lldb thread -> frame index -> module, read once per call
}

// Call runs one operation.
func (t *Tool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Error("The arguments are not valid: " + err.Error()), nil
	}
	conn, res, err := tools.Open(ctx, env)
	if res != nil || err != nil {
		return tools.Deref(res), err
	}
	c := &call{
		sv: t.sv, conn: conn, root: conn.Workdir, a: a,
		key:   convKey(conn.ID, env.Run.Tenant, env.Run.Conversation),
		label: convLabel(env.Run.Tenant, env.Run.Conversation),
	}
	var text string
	switch a.Operation {
	case "adapters":
		text, err = c.adapters(ctx)
	case "status":
		text, err = c.status(ctx)
	case "breakpoints":
		text, err = c.breakpoints(ctx)
	case "launch":
		text, err = c.launch(ctx)
	case "attach":
		text, err = c.attach(ctx)
	case "continue", "pause", "step_over", "step_in", "step_out":
		text, err = c.move(ctx, a.Operation)
	case "threads":
		text, err = c.threads(ctx)
	case "stack":
		text, err = c.stack(ctx)
	case "scopes":
		text, err = c.scopes(ctx)
	case "variables":
		text, err = c.variables(ctx)
	case "evaluate":
		text, err = c.evaluate(ctx)
	case "output":
		text, err = c.output(ctx)
	case "terminate":
		text, err = c.terminate(ctx)
	default:
		return tools.Error(fmt.Sprintf("Unknown operation %q; use one of %v.", a.Operation, operations)), nil
	}
	if err != nil {
		return failure(err)
	}
	return tools.Text(text), nil
}

// userError is a problem with the call the model can fix.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func userf(format string, a ...any) error { return &userError{msg: fmt.Sprintf(format, a...)} }

// failure is the result for an operation's error, by the Tool contract: a
// problem with the call or the program's setup is the model's to read; a
// classed error (an agent that dropped, a deadline inside the sandbox) is
// an is_error result counted by its class (tools.Fail); only an error of
// no class is returned, as sandboxd's own.
func failure(err error) (tools.Result, error) {
	var ue *userError
	if errors.As(err, &ue) {
		return tools.Error(ue.msg), nil
	}
	var se *setupError
	if errors.As(err, &se) {
		return tools.Error(se.msg), nil
	}
	return tools.Fail(err)
}

// abs resolves a path given by the model against the working directory,
// without confinement (a program may be any binary of the sandbox).
func (c *call) abs(p string) string { return c.conn.Abs(p) }

// rel shows p relative to the working directory when it lies below it.
func (c *call) rel(p string) string {
	if r := c.conn.Rel(p); r != "." {
		return r
	}
	return p
}

func pathBase(p string) string { return path.Base(p) }

func remaining(started time.Time, ttl time.Duration) time.Duration {
	return (ttl - time.Since(started)).Round(time.Second)
}
