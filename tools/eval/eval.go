// Package eval is the eval tool (DESIGN.md §4 "eval"): persistent Python and
// JavaScript kernels, one per conversation and language, running in the
// conversation's sandbox (or on the host when it has none) under the sandbox
// agent, which owns them: they outlive a dropped pipe and a sandboxd
// restart. The kernel programs come from package kernels; the protocol runs
// on the kernel's own pipes (fds 3 and 4), so user code printing to stdout
// cannot wedge it. tool() calls from a cell come back over the same pipe and
// run through the registry with the calling run's Env.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// Registry is what the bridge needs of the tool registry.
type Registry interface {
	Call(ctx context.Context, env *tools.Env, name string, args json.RawMessage) (tools.Result, error)
	Visible(env *tools.Env) []tools.Spec
}

// HostAgent gives the agent that runs kernels of conversations without a
// sandbox, the host folder they live under, and the jail each runs in.
type HostAgent interface {
	Agent(ctx context.Context) (*agent.Client, error)
	Root() string
	// Jail is the confinement of owner's kernels (uid, limits), or why
	// none can be made; the pool fills in the paths and the program.
	Jail(owner string) (*jail.Spec, error)
	// Started reports whether the agent may be running kernels (so ending
	// a run need not start one only to find none).
	Started() bool
	// Release removes owner's scratch and frees its uid once its kernels
	// are killed.
	Release(owner string) error
}

// SandboxKernelRoot is where kernel programs are written inside a sandbox:
// outside the workspace, so the user's checkout never sees them.
const SandboxKernelRoot = "/tmp/.sandboxd-kernels"

type config struct {
	budget     time.Duration
	maxBudget  time.Duration
	grace      time.Duration
	startTO    time.Duration
	streamCap  int
	displayCap int
	maxImages  int
	interp     map[string]string
	host       HostAgent
	stateDir   string
}

// Option configures the eval tool.
type Option func(*config)

// WithBudget sets the default idle budget of a cell (300 s) and the largest
// timeout_s accepted (3600 s).
func WithBudget(def, max time.Duration) Option {
	return func(c *config) { c.budget, c.maxBudget = def, max }
}

// WithInterruptGrace sets how long a cell may take to stop after its
// interrupt before the kernel is restarted (5 s).
func WithInterruptGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithOutputCap caps each of stdout and stderr of one cell (64 KiB; half
// from the head, half from the tail).
func WithOutputCap(n int) Option { return func(c *config) { c.streamCap = n } }

// WithInterpreters names the interpreter commands (python3, node).
func WithInterpreters(python, node string) Option {
	return func(c *config) {
		if python != "" {
			c.interp["python"] = python
		}
		if node != "" {
			c.interp["javascript"] = node
		}
	}
}

// WithHost runs kernels of conversations without a sandbox through h.
// Without it such conversations do not see eval.
func WithHost(h HostAgent) Option { return func(c *config) { c.host = h } }

// WithStateDir keeps where each conversation's kernels were started under
// dir, so a kernel whose sandbox disappeared is reported after a restart
// too. Without it that is remembered in memory only.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// Tool is the eval tool. Close detaches from every kernel (they keep
// running in their agents).
type Tool struct {
	reg    Registry
	cfg    *config
	pool   *pool
	places *placeLog
}

var _ tools.Tool = (*Tool)(nil)

// New returns the eval tool; reg is the registry tool() calls go through.
func New(reg Registry, opts ...Option) *Tool {
	c := &config{
		budget: 300 * time.Second, maxBudget: time.Hour, grace: 5 * time.Second, startTO: 30 * time.Second,
		streamCap: 64 << 10, displayCap: 64 << 10, maxImages: 20,
		interp: map[string]string{"python": "python3", "javascript": "node"},
	}
	for _, o := range opts {
		o(c)
	}
	return &Tool{reg: reg, cfg: c, pool: newPool(c.interp, c.startTO), places: newPlaceLog(c.stateDir)}
}

// Close detaches from the kernels.
func (t *Tool) Close() { t.pool.closeAll() }

// EndRun kills the host kernels of run's conversation (of the run itself
// when it has none), removes their scratch and frees their uid: a host
// kernel lives no longer than the runs that use it. The caller tells when
// no other run of the conversation is left. Kernels in a sandbox stay:
// they live as long as their sandbox.
func (t *Tool) EndRun(ctx context.Context, run tools.Run) error {
	if t.cfg.host == nil || !t.cfg.host.Started() {
		return nil
	}
	c, err := t.cfg.host.Agent(ctx)
	if err != nil {
		return err
	}
	owner := ownerOf(run.Tenant, run.Conversation, run.ID)
	if err := t.pool.killOwner(ctx, c, "host", owner); err != nil {
		return err
	}
	return t.cfg.host.Release(owner)
}

// Languages lists the kernel languages eval offers (its schema's enum).
func Languages() []string { return []string{"python", "javascript"} }

// Kernels counts the live kernels this sandboxd is attached to, by
// language, for the metrics.
func (t *Tool) Kernels() map[string]int { return t.pool.live() }

const description = `Run Python (default) or JavaScript in a persistent kernel, like a notebook cell: variables, imports and loaded data survive between calls of this conversation.
- The last expression is shown (Python: not when the cell ends with ';'); display(obj) shows more. A pandas DataFrame comes back as a table; every open matplotlib figure comes back as a PNG image after the cell, with its titles, axes and series as text; PIL images come back as PNG.
- IPython idioms work in Python: %pip install (the next import sees the new package), !cmd, x = !cmd, %cd, %%bash, %%timeit, %time, %env, %%writefile, from IPython.display import display, Markdown, HTML, Image. JavaScript cells may use static import statements.
- tool(name, args) calls this run's other tools from inside a cell, e.g. text = tool("read", {"path": "src/app.py"}) (JavaScript: await tool(...)); it raises ToolError with the tool's message on failure. Levels and approvals apply as to your own calls.
- timeout_s is an idle budget (default 300 s) not counting time spent in tool() calls; when it runs out the cell is interrupted and the variables are kept.
- input() fails: there is no stdin. Output is capped (head and tail kept). A kernel that died is reported on the next call and the cell is not re-run; reset: true starts a clean kernel.
- description is required: a 5-10 word label of what the cell does, for the transcript.`

// Spec describes eval for the model.
func (t *Tool) Spec() tools.Spec {
	return tools.Spec{
		Name:         "eval",
		Description:  description,
		Level:        tools.LevelExec,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "code": {"type": "string", "description": "The cell's code. May be empty with reset: true."},
    "description": {"type": "string", "minLength": 1, "description": "A 5-10 word label of what the cell does, for the transcript."},
    "language": {"type": "string", "enum": ["python", "javascript"], "description": "Kernel language (default python). Each language has its own kernel."},
    "reset": {"type": "boolean", "description": "Kill the kernel and start a clean one before running the code."},
    "timeout_s": {"type": "number", "minimum": 1, "maximum": 604800, "description": "Idle budget in seconds (default 300), not counting tool() calls."}
  },
  "required": ["code", "description"],
  "additionalProperties": false
}`),
	}
}

// Available: eval is on where a kernel can run — the conversation's sandbox,
// or the host when host kernels are configured. It never boots a sandbox.
func (t *Tool) Available(env *tools.Env) bool {
	return env != nil && (env.HasSandbox || t.cfg.host != nil)
}

type evalArgs struct {
	Code        string   `json:"code"`
	Description string   `json:"description"`
	Language    string   `json:"language"`
	Reset       bool     `json:"reset"`
	TimeoutS    *float64 `json:"timeout_s"`
}

// Call runs one cell.
func (t *Tool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a evalArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Error("eval arguments are not valid: " + err.Error()), nil
	}
	a.Description = strings.TrimSpace(a.Description)
	if a.Description == "" {
		return tools.Error("description is empty; give a 5-10 word label of what the cell does"), nil
	}
	if a.Language == "" {
		a.Language = "python"
	}
	budget := t.cfg.budget
	if a.TimeoutS != nil {
		budget = time.Duration(*a.TimeoutS * float64(time.Second))
		if budget > t.cfg.maxBudget {
			return tools.Error(fmt.Sprintf("timeout_s %g is larger than the most allowed, %g; give a smaller budget", *a.TimeoutS, t.cfg.maxBudget.Seconds())), nil
		}
	}
	if strings.TrimSpace(a.Code) == "" && !a.Reset {
		return tools.Error("code is empty; give the code to run (or reset: true to restart the kernel)"), nil
	}
	p, res, err := t.place(ctx, env)
	if res != nil || err != nil {
		return tools.Deref(res), err
	}

	var k *kernel
	head := []tools.Block{{Type: "text", Text: a.Description}}
	// A kernel lives where it was started: one that is no longer there
	// (its sandbox is gone, or the conversation got one) is reported once,
	// never quietly replaced by a kernel in another environment.
	if prev := t.places.get(p.owner); prev != "" && prev != p.key {
		t.places.clear(p.owner)
		if prev == "host" {
			_ = t.EndRun(ctx, *runOf(env)) // best effort: they are never used again
		}
		if !a.Reset {
			return tools.Result{IsError: true, Content: append(head, tools.Block{Type: "text", Text: movedNote(prev, p.key)})}, nil
		}
	}
	if a.Reset {
		k, err = t.pool.reset(ctx, p, a.Language)
		if err != nil {
			return modelError(err)
		}
		if err := t.places.set(p.owner, p.key); err != nil {
			return modelError(err)
		}
		if strings.TrimSpace(a.Code) == "" {
			return tools.Result{Content: append(head, tools.Block{Type: "text", Text: "A clean " + a.Language + " kernel is ready; all variables were cleared."})}, nil
		}
	} else {
		var died string
		k, died, err = t.pool.get(ctx, p, a.Language)
		if err != nil {
			return modelError(err)
		}
		if died != "" {
			return tools.Result{IsError: true, Content: append(head, tools.Block{Type: "text", Text: died + ". " + notRun})}, nil
		}
	}
	if err := t.places.set(p.owner, p.key); err != nil {
		return modelError(err)
	}

	out := newOutput(t.cfg.streamCap, t.cfg.displayCap, t.cfg.maxImages)
	run := k.execute(withLiveOutput(ctx, t.cfg.streamCap), message{Code: a.Code}, budget, t.cfg.grace, out, t.bridge(env))
	if run.count > 0 {
		// Numbered as a notebook numbers its cells: "[3] load the data".
		head[0].Text = fmt.Sprintf("[%d] %s", run.count, a.Description)
	}
	blocks := append(head, out.finish()...)
	note := func(isErr bool, text string) (tools.Result, error) {
		if text != "" {
			blocks = append(blocks, tools.Block{Type: "text", Text: text})
		}
		return tools.Result{Content: blocks, IsError: isErr, ExecutionCount: run.count}, nil
	}
	switch run.end {
	case endDone:
		switch run.status {
		case "ok":
			return note(false, "")
		case "interrupted":
			return note(true, "The cell was interrupted; the kernel and its variables are kept.\n"+run.errText)
		default:
			return note(true, run.errText)
		}
	case endInterrupted:
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		return note(true, fmt.Sprintf("The cell ran past its budget of %s (time in tool() calls not counted) and was interrupted; the kernel and its variables are kept.\n%s", budget, run.errText))
	case endStuck:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.startTO)
		defer cancel()
		if err := t.pool.replace(rctx, p, a.Language); err != nil {
			return note(true, fmt.Sprintf("The cell did not stop within %s of its interrupt, so the kernel was killed and its state is lost; a new kernel could not be started: %v", t.cfg.grace, err))
		}
		return note(true, fmt.Sprintf("The cell ran past its budget of %s and did not stop within %s of its interrupt, so the kernel was restarted: its state is lost; a new kernel is ready.", budget, t.cfg.grace))
	default: // endGone
		return note(true, t.afterGone(ctx, env, p, a.Language, k, run.started))
	}
}

// afterGone tells a dead kernel from a dropped pipe, and a dropped pipe
// from a sandbox deleted under the cell (the kernel went with it).
func (t *Tool) afterGone(ctx context.Context, env *tools.Env, p *place, lang string, k *kernel, sent time.Time) string {
	t.pool.forget(p, lang, k)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.startTO)
	defer cancel()
	info, err := k.agent.Wait(wctx, &proto.WaitRequest{ID: k.proc.ID, Timeout: 2 * time.Second})
	if err != nil && !p.host {
		// The pipe is gone: ask whether the sandbox still exists before
		// advising to reconnect to it.
		if _, res, _ := tools.Open(wctx, env); res != nil {
			if tools.Gone(res.Cause()) {
				t.places.clear(p.owner)
				return deletedUnder(sandboxOf(p.key), t.cfg.host != nil)
			}
			return "The connection to the kernel dropped while the cell ran; its output is lost (the cell was not re-run), and the sandbox cannot be used now: " + res.Text()
		}
	}
	if err != nil || info.Running {
		return "The connection to the kernel dropped while the cell ran; its output is lost. The kernel may still be running: call eval again to reconnect (the cell was not re-run)."
	}
	if err := t.pool.replace(wctx, p, lang); err != nil {
		return fmt.Sprintf("%s while running this cell; a new kernel could not be started: %v", deathCause(*info), err)
	}
	// What the interpreter itself printed as it died (a fatal error, an
	// out-of-memory message) is the best clue; its pipes end with it.
	select {
	case <-k.drained:
	case <-time.After(time.Second):
	}
	last := ""
	if fd := strings.TrimSpace(string(k.takeFdOut())); fd != "" {
		if len(fd) > 2000 {
			fd = "..." + fd[len(fd)-2000:]
		}
		last = "\nIts last output:\n" + fd
	}
	if info.ExitedAt.Before(sent) {
		return deathNote(*info) + ". " + notRun + last
	}
	if info.Hibernated {
		return deathNote(*info) + ". It was stopped while running this cell; the cell was not re-run." + last
	}
	return deathNote(*info) + ". It died while running this cell; the cell was not re-run." + last
}

// notRun follows the report of a kernel found dead before a cell.
const notRun = "This cell was not run; run it again if it does not depend on lost variables."

// place finds where the conversation's kernels run.
func (t *Tool) place(ctx context.Context, env *tools.Env) (*place, *tools.Result, error) {
	run := runOf(env)
	owner := ownerOf(run.Tenant, run.Conversation, run.ID)
	if env.HasSandbox && env.Sandbox != nil {
		conn, res, err := tools.Open(ctx, env)
		if res != nil {
			// The sandbox went while sandboxd still had it (removed behind
			// its back): say what that means for the kernels.
			if prev := t.places.get(owner); sandboxOf(prev) != "" && tools.Gone(res.Cause()) {
				t.places.clear(owner)
				r := tools.Error(goneBehind(prev, res.Cause(), t.cfg.host != nil))
				return nil, &r, nil
			}
			return nil, res, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if conn.Agent == nil {
			return nil, nil, errors.New("the sandbox connection has no agent")
		}
		dir := conn.Workdir
		return &place{key: "sandbox/" + conn.ID, agent: conn.Agent, root: SandboxKernelRoot, dir: dir, owner: owner}, nil, nil
	}
	if t.cfg.host == nil {
		if prev := t.places.get(owner); sandboxOf(prev) != "" {
			t.places.clear(owner)
			r := tools.Error(goneNoHost(prev))
			return nil, &r, nil
		}
		r := tools.Error("eval needs a sandbox for this conversation (host kernels are turned off); create a sandbox first")
		return nil, &r, nil
	}
	c, err := t.cfg.host.Agent(ctx)
	if err != nil {
		r, e := modelError(err)
		return nil, &r, e
	}
	root := t.cfg.host.Root()
	return &place{key: "host", agent: c, root: path.Join(root, "programs"), dir: path.Join(root, "work", owner), host: true, owner: owner,
		jail: func() (*jail.Spec, error) { return t.cfg.host.Jail(owner) }}, nil, nil
}

func runOf(env *tools.Env) *tools.Run {
	if env.Run == nil {
		return &tools.Run{}
	}
	return env.Run
}

// modelError turns errors the model can act on into an is_error result.
func modelError(err error) (tools.Result, error) { return tools.Fail(err) }
