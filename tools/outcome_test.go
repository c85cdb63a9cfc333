package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

type refuseAll struct{}

func (refuseAll) Check(_ context.Context, _ *Env, spec Spec, _ json.RawMessage) *Result {
	r := Error("denied by the user: the " + spec.Name + " call was not run")
	return &r
}

// Each way a call ends is observed under one outcome: what the model can
// act on is tool_error, and only sandboxd's own trouble is failure.
func TestOutcomeClasses(t *testing.T) {
	gone := errdefs.NotFound("the sandbox of conversation c1 no longer exists (it was removed outside sandboxd); create a new one")
	cases := []struct {
		name    string
		level   Level
		call    func(ctx context.Context, env *Env) (Result, error)
		sandbox func(ctx context.Context) (*SandboxConn, error)
		cancel  bool
		want    string
		text    string
	}{
		{name: "missing_file", call: func(context.Context, *Env) (Result, error) {
			return Fail(errdefs.NotFound("/workspace/nope.txt does not exist; list the directory with shell"))
		}, want: OutcomeToolError, text: "does not exist"},
		{name: "bad_path", call: func(context.Context, *Env) (Result, error) {
			return Fail(errdefs.InvalidArgument("path %q is outside the workspace", "/etc/passwd"))
		}, want: OutcomeToolError},
		{name: "own_sentence", call: func(context.Context, *Env) (Result, error) {
			return Error("old text not found in a.txt"), nil
		}, want: OutcomeToolError},
		{name: "agent_gone", call: func(context.Context, *Env) (Result, error) {
			return Fail(fmt.Errorf("read a.txt: %w", errdefs.Unavailable("the sandbox agent session has ended during read_file; reconnect to the sandbox and retry")))
		}, want: OutcomeFailure, text: "session has ended"},
		{name: "deadline_inside", call: func(context.Context, *Env) (Result, error) {
			return Fail(errdefs.DeadlineExceeded("agent read_file did not finish before the deadline"))
		}, want: OutcomeFailure},
		{name: "server_crashed", call: func(context.Context, *Env) (Result, error) {
			return ErrorFrom(errdefs.Unavailable("the gopls language server crashed 3 times in 1m and is not restarted again")), nil
		}, want: OutcomeFailure, text: "crashed"},
		{name: "file_changed", call: func(context.Context, *Env) (Result, error) {
			return ErrorFrom(errdefs.Conflict("a.txt changed since it was read; read it again")), nil
		}, want: OutcomeToolError},
		{name: "internal", call: func(context.Context, *Env) (Result, error) {
			return Fail(errdefs.Internal("the journal cannot be written"))
		}, want: OutcomeFailure, text: "internal error: the journal cannot be written"},
		{name: "sandbox_removed", call: func(ctx context.Context, env *Env) (Result, error) {
			_, res, err := Open(ctx, env)
			if res != nil {
				return *res, err
			}
			return Result{}, errors.New("connected to a removed sandbox")
		}, sandbox: func(context.Context) (*SandboxConn, error) { return nil, gone }, want: OutcomeFailure, text: "removed outside sandboxd"},
		{name: "caller_left", call: func(ctx context.Context, env *Env) (Result, error) {
			<-ctx.Done()
			return Fail(errdefs.DeadlineExceeded("agent read_file did not finish before the deadline"))
		}, cancel: true, want: OutcomeCanceled},
		{name: "denied", level: LevelWrite, want: OutcomeToolError, text: "denied by the user"},
		{name: "bad_args", want: OutcomeInvalidArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := NewRegistry(WithObserver(rec), WithGate(refuseAll{}))
			level := tc.level
			if level == "" {
				level = LevelRead
			}
			f := newFake(tc.name, level, true)
			if tc.call != nil {
				f.call = func(ctx context.Context, env *Env, _ json.RawMessage) (Result, error) { return tc.call(ctx, env) }
			}
			r.Register(f)
			env := envFor("default", true)
			env.Sandbox = tc.sandbox
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			args := `{"path":"a.txt"}`
			if tc.want == OutcomeInvalidArguments {
				args = `{"file":"a.txt"}`
			}
			res, err := r.Call(ctx, env, tc.name, json.RawMessage(args))
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !res.IsError || !strings.Contains(res.Text(), tc.text) {
				t.Errorf("result = %+v, want an is_error result containing %q", res, tc.text)
			}
			if got := rec.last(); got != (record{tc.name, level, tc.want}) {
				t.Errorf("observed %+v, want outcome %s", got, tc.want)
			}
		})
	}
}

// Outcomes is the closed set every observed outcome belongs to.
func TestOutcomesClosedSet(t *testing.T) {
	all := Outcomes()
	for _, o := range []string{OutcomeOK, OutcomeInvalidArguments, OutcomeToolError, OutcomeCanceled, OutcomeFailure} {
		if !slices.Contains(all, o) {
			t.Errorf("Outcomes() = %v lacks %q", all, o)
		}
	}
	if len(all) != 5 {
		t.Errorf("Outcomes() = %v, want 5 values", all)
	}
	if ok := resultOutcome(context.Background(), Text("fine")); ok != OutcomeOK {
		t.Errorf("a successful result is %q", ok)
	}
}

func TestSpecsListsEveryTool(t *testing.T) {
	r := NewRegistry()
	hidden := newFake("hidden", LevelExec, false)
	hidden.available = func(*Env) bool { return false }
	r.Register(newFake("read", LevelRead, true))
	r.Register(hidden)
	if got := names(r.Specs()); got != "read,hidden" {
		t.Errorf("Specs() = %s, want read,hidden (conditions ignored)", got)
	}
}
