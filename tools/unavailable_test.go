package tools

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// explainedFake is a fake whose registration condition says why it fails.
type explainedFake struct {
	*fakeTool
	why func(*Env) string
}

func (f explainedFake) Why(env *Env) string { return f.why(env) }

func sandboxFake(name string, level Level) explainedFake {
	f := newFake(name, level, true)
	f.available = HasSandbox
	return explainedFake{f, WhyNoSandbox}
}

// A run without a sandbox is told which tools are absent and why, grouped
// by reason; a call of one gets 404 with that reason, and the tool never
// runs.
func TestUnavailableSaysWhy(t *testing.T) {
	r := NewRegistry()
	read, shell := sandboxFake("read", LevelRead), sandboxFake("shell", LevelExec)
	ask := newFake("ask_user", LevelRead, true)
	ask.available = func(e *Env) bool { return e.Run.Space != "" }
	r.Register(read)
	r.Register(shell)
	r.Register(explainedFake{ask, func(*Env) string { return "the run has no space" }})
	bare := newFake("bare", LevelRead, true)
	bare.available = func(*Env) bool { return false }
	r.Register(bare)
	r.Omit("debug supervision is off in this sandboxd's config", "debug")

	env := envFor("default", false)
	noSandbox := `the conversation "c1" has no sandbox; create one with POST /v1/sandboxes {"conversation": "c1"} and these tools join this run's list (the run need not be made again)`
	want := []Unavailable{
		{Tools: []string{"read", "shell"}, Reason: noSandbox},
		{Tools: []string{"ask_user"}, Reason: "the run has no space"},
		{Tools: []string{"bare"}, Reason: "this run does not meet the tool's registration condition (DESIGN.md §4)"},
		{Tools: []string{"debug"}, Reason: "debug supervision is off in this sandboxd's config"},
	}
	if got := r.Unavailable(env); !reflect.DeepEqual(got, want) {
		t.Fatalf("Unavailable:\n got %+v\nwant %+v", got, want)
	}
	for name, reason := range map[string]string{"read": noSandbox, "shell": noSandbox, "debug": "debug supervision is off"} {
		_, err := r.Call(context.Background(), env, name, json.RawMessage(`{"path":"a"}`))
		if !errors.Is(err, errdefs.ErrNotFound) || !strings.HasPrefix(err.Error(), `tool "`+name+`" is not available to this run: `+reason) {
			t.Errorf("call %s: %v, want NotFound with %q", name, err, reason)
		}
	}
	if read.count()+shell.count() != 0 {
		t.Fatal("an unavailable tool ran")
	}
	// A name nobody registered or left out keeps the plain error.
	if _, err := r.Call(context.Background(), env, "nope", nil); err == nil || !strings.Contains(err.Error(), "list the run's tools") {
		t.Errorf("unknown tool: %v", err)
	}
	// With a sandbox and a space, only what wiring left out (and the tool
	// whose condition never holds) remains.
	env = envFor("default", true)
	env.Run.Space = "s1"
	if got := r.Unavailable(env); len(got) != 2 || got[0].Tools[0] != "bare" || got[1].Tools[0] != "debug" {
		t.Fatalf("with a sandbox: %+v", got)
	}
}

// On a plan surface, write and exec tools are absent because of the
// surface, whatever else holds.
func TestUnavailableBySurface(t *testing.T) {
	r := NewRegistry()
	r.Register(sandboxFake("read", LevelRead))
	r.Register(sandboxFake("write", LevelWrite))
	r.Register(sandboxFake("shell", LevelExec))
	got := r.Unavailable(envFor("plan", true))
	if len(got) != 2 || got[0].Tools[0] != "write" || got[1].Tools[0] != "shell" ||
		!strings.Contains(got[0].Reason, `surface "plan" allows read-level tools only`) {
		t.Fatalf("plan: %+v", got)
	}
	_, err := r.Call(context.Background(), envFor("plan", true), "write", json.RawMessage(`{"path":"a"}`))
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `surface "default"`) {
		t.Fatalf("write on plan: %v", err)
	}
	if got := r.Unavailable(envFor("default", true)); len(got) != 0 {
		t.Fatalf("default with a sandbox: %+v", got)
	}
}

// The tool receives its arguments as the schema normalised them: an
// integer spelled 2.0 arrives as 2, which decodes into an int.
func TestToolGetsNormalisedArguments(t *testing.T) {
	r := NewRegistry()
	f := newFake("read", LevelRead, true)
	f.call = func(_ context.Context, _ *Env, args json.RawMessage) (Result, error) {
		var a struct {
			Path string `json:"path"`
			N    int    `json:"n"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return Result{}, err
		}
		return Text(string(args)), nil
	}
	r.Register(f)
	res, err := r.Call(context.Background(), envFor("default", true), "read", json.RawMessage(`{"path":"a","n":2.0}`))
	if err != nil || res.IsError || res.Text() != `{"n":2,"path":"a"}` {
		t.Fatalf("got %+v %v", res, err)
	}
	for _, n := range []string{"9223372036854775808", "1e999", "1e+308", "-1e400"} {
		res, err := r.Call(context.Background(), envFor("default", true), "read", json.RawMessage(`{"path":"a","n":`+n+`}`))
		if err != nil || !res.IsError || !strings.HasPrefix(res.Text(), `argument "n" must be at`) || strings.Contains(res.Text(), "internal") {
			t.Errorf("n=%s: %+v %v", n, res, err)
		}
	}
}
