package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools/schema"
)

// Outcomes of a call as reported to a CallObserver (a closed set: metrics
// use it as a label; see Outcomes).
const (
	OutcomeOK               = "ok"
	OutcomeToolError        = "tool_error"
	OutcomeInvalidArguments = "invalid_arguments"
	OutcomeFailure          = "failure"
	OutcomeCanceled         = "canceled"
)

// Registry holds the registered tools and routes calls to them. Register
// all tools at start-up; afterwards Visible and Call are safe for concurrent
// use. It starts no goroutines.
type Registry struct {
	entries []*entry // registration order; written only by Register
	byName  map[string]*entry
	omitted []Unavailable // families wiring left out; written only by Omit
	serial  *serializer
	obs     []CallObserver // WithObserver, then AddObserver; each may also be a CallRecorder
	log     *slog.Logger
	gate    Gate
}

type entry struct {
	tool   Tool
	spec   Spec
	schema *schema.Schema
}

// Option configures a Registry.
type Option func(*Registry)

// WithObserver receives one record per finished call. An observer that is
// also a CallRecorder gets the call's full record as well.
func WithObserver(o CallObserver) Option { return func(r *Registry) { r.obs = append(r.obs, o) } }

// AddObserver is WithObserver for wiring that gets the registry already
// made. Like Register, call it at start-up, before the first Call.
func (r *Registry) AddObserver(o CallObserver) { r.obs = append(r.obs, o) }

// WithLogger sets where internal errors and recovered panics are logged.
func WithLogger(l *slog.Logger) Option { return func(r *Registry) { r.log = l } }

// Gate decides whether a write or exec call may run (the approval gate). It
// sees the call after its arguments are validated and before it queues
// behind the conversation's other calls. It returns nil to let the call
// run, or the result the call returns instead (a refusal the model reads).
// Read-level calls never reach it.
type Gate interface {
	Check(ctx context.Context, env *Env, spec Spec, args json.RawMessage) *Result
}

// WithGate puts g in front of every write and exec call, whoever makes it
// (the API, or a tool that calls back into the registry).
func WithGate(g Gate) Option { return func(r *Registry) { r.gate = g } }

// SetGate is WithGate for wiring that gets the registry already made. Like
// Register, call it at start-up, before the first Call.
func (r *Registry) SetGate(g Gate) { r.gate = g }

// NewRegistry returns an empty registry.
func NewRegistry(opts ...Option) *Registry {
	r := &Registry{byName: map[string]*entry{}, serial: newSerializer()}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Register adds a tool. A duplicate name, an unknown level or a schema that
// does not compile is a wiring bug and panics at start-up.
func (r *Registry) Register(t Tool) {
	spec := t.Spec()
	if spec.Name == "" {
		panic("tools: Register of a tool with an empty name")
	}
	if _, dup := r.byName[spec.Name]; dup {
		panic(fmt.Sprintf("tools: tool %q registered twice", spec.Name))
	}
	switch spec.Level {
	case LevelRead, LevelWrite, LevelExec:
	default:
		panic(fmt.Sprintf("tools: tool %q has unknown level %q", spec.Name, spec.Level))
	}
	if len(spec.InputSchema) == 0 {
		spec.InputSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	}
	sc, err := schema.Compile(spec.InputSchema)
	if err != nil {
		panic(fmt.Sprintf("tools: tool %q: %v", spec.Name, err))
	}
	e := &entry{tool: t, spec: spec, schema: sc}
	r.entries = append(r.entries, e)
	r.byName[spec.Name] = e
}

// LevelAllowed reports whether a run on surface may see a tool of level.
// Plan and readonly runs are capped at read; an unknown surface is treated
// as read-only, so a typo never widens what a run may do.
func LevelAllowed(surface string, level Level) bool {
	switch surface {
	case "", SurfaceDefault:
		return true
	}
	return level == LevelRead
}

func (r *Registry) visible(env *Env, e *entry) bool {
	surface := ""
	if env != nil && env.Run != nil {
		surface = env.Run.Surface
	}
	return LevelAllowed(surface, e.spec.Level) && e.tool.Available(env)
}

// Visible lists the specs of the tools the run may see, in registration order.
func (r *Registry) Visible(env *Env) []Spec {
	out := []Spec{}
	for _, e := range r.entries {
		if r.visible(env, e) {
			out = append(out, e.spec)
		}
	}
	return out
}

// Call runs the named tool. A tool the run cannot see is an
// errdefs.ErrNotFound error; a call whose ctx ends while it waits for its
// turn returns ctx's error. Everything else — bad arguments, the tool's own
// errors, a panic — is a Result with IsError for the model to read.
func (r *Registry) Call(ctx context.Context, env *Env, name string, args json.RawMessage) (res Result, err error) {
	start := time.Now()
	e := r.byName[name]
	if e == nil {
		if why, ok := r.omittedWhy(name); ok {
			return Result{}, errdefs.NotFound("tool %q is not available to this run: %s", name, why)
		}
		return Result{}, errdefs.NotFound("tool %q is not available to this run; list the run's tools to see which are", name)
	}
	if !r.visible(env, e) {
		return Result{}, errdefs.NotFound("tool %q is not available to this run: %s", name, r.why(env, e))
	}
	outcome := OutcomeOK
	recArgs := args // what a CallRecorder sees: normalised below once valid
	note := &callNote{}
	ctx = context.WithValue(ctx, callNoteKey{}, note)
	callCtx := ctx
	defer func() {
		d := time.Since(start)
		for _, o := range r.obs {
			o.ObserveToolCall(e.spec.Name, e.spec.Level, outcome, d)
			_, isRec := o.(CallRecorder)
			_, isAud := o.(CallAuditor)
			if !isRec && !isAud {
				continue
			}
			cr := CallRecord{Run: runOf(env), Tool: e.spec.Name, Level: e.spec.Level,
				Args: recArgs, Started: start, Duration: d, Outcome: outcome, Result: res, Approval: note.approval}
			if rec, ok := o.(CallRecorder); ok {
				rec.RecordToolCall(cr)
			}
			if aud, ok := o.(CallAuditor); ok {
				aud.AuditToolCall(callCtx, cr)
			}
		}
	}()

	if len(args) == 0 || len(trimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	// The tool and the gate get the arguments as the schema normalised
	// them, so every value it accepted decodes into the tool's Go types.
	args, verr := e.schema.Normalize(args)
	if verr != nil {
		outcome = OutcomeInvalidArguments
		return Error(verr.Error()), nil
	}
	recArgs = args

	if r.gate != nil && e.spec.Level != LevelRead {
		if refused := r.gate.Check(ctx, env, e.spec, args); refused != nil {
			outcome = OutcomeToolError
			res = *refused
			if res.Content == nil {
				res.Content = []Block{}
			}
			return res, nil
		}
	}

	if key := serialKey(env); !e.spec.ParallelSafe && !holdsTurn(ctx, key) {
		scope := scopeOf(e.tool, env, args)
		release, qerr := r.serial.acquireScoped(ctx, key, scope)
		if qerr != nil {
			outcome = OutcomeCanceled
			const msg = "tool %q was not run: the call ended while it waited for an earlier call in this conversation to finish: %w"
			if errors.Is(qerr, context.DeadlineExceeded) {
				return Result{}, errdefs.DeadlineExceeded(msg, name, qerr)
			}
			return Result{}, errdefs.Unavailable(msg, name, qerr)
		}
		defer release()
		if scope == nil {
			ctx = withTurn(ctx, key)
		}
	}

	res, terr, panicked := r.invoke(ctx, env, e, args)
	switch {
	case panicked:
		outcome = OutcomeFailure
	case terr != nil && ctx.Err() != nil && errors.Is(terr, ctx.Err()):
		outcome = OutcomeCanceled
		res = Error(fmt.Sprintf("the %s call was canceled before it finished", name))
	case terr != nil:
		outcome = OutcomeFailure
		r.log.ErrorContext(ctx, "tool call failed", "tool", name, "run", runID(env), "err", terr)
		res = Error("internal error: " + terr.Error())
	case res.IsError:
		outcome = resultOutcome(ctx, res)
	}
	if res.Content == nil {
		res.Content = []Block{}
	}
	return res, nil
}

// invoke calls the tool, turning a panic into an is_error result so one
// broken tool cannot take the daemon down.
func (r *Registry) invoke(ctx context.Context, env *Env, e *entry, args json.RawMessage) (res Result, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			r.log.ErrorContext(ctx, "tool panicked", "tool", e.spec.Name, "run", runID(env),
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err, panicked = Error(fmt.Sprintf("internal error: the %s tool failed unexpectedly (%v); its effect is unknown, check before retrying", e.spec.Name, p)), nil, true
		}
	}()
	res, err = e.tool.Call(ctx, env, args)
	return res, err, false
}

// scopeOf is the names a call of t changes (Scoped), or nil for the whole
// conversation.
func scopeOf(t Tool, env *Env, args json.RawMessage) []string {
	sc, ok := t.(Scoped)
	if !ok {
		return nil
	}
	names, ok := sc.Scope(env, args)
	if !ok || len(names) == 0 {
		return nil
	}
	return names
}

// serialKey is the queue that non-parallel-safe calls share: the
// conversation, within its tenant (a run without a conversation queues alone).
func serialKey(env *Env) string {
	if env == nil || env.Run == nil {
		return ""
	}
	if env.Run.Conversation == "" {
		return "run\x00" + env.Run.ID
	}
	return "conv\x00" + env.Run.Tenant + "\x00" + env.Run.Conversation
}

func runOf(env *Env) *Run {
	if env == nil {
		return nil
	}
	return env.Run
}

func runID(env *Env) string {
	if env == nil || env.Run == nil {
		return ""
	}
	return env.Run.ID
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
