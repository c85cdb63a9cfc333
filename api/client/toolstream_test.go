package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// talkTool prints two lines, the second only once the test saw the first.
type talkTool struct{ seen chan struct{} }

func (talkTool) Spec() tools.Spec {
	return tools.Spec{Name: "talk", Description: "talk", Level: tools.LevelRead, ParallelSafe: true}
}
func (talkTool) Available(*tools.Env) bool { return true }
func (t talkTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	tools.EmitOutput(ctx, tools.StreamStdout, "one\n")
	if tools.OutputSinkFrom(ctx) != nil {
		select {
		case <-t.seen:
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	}
	tools.EmitOutput(ctx, tools.StreamStderr, "two\n")
	return tools.Text("talked"), nil
}

func TestCallToolStream(t *testing.T) {
	seen := make(chan struct{})
	reg := tools.NewRegistry()
	reg.Register(talkTool{seen})
	reg.Register(echoTool{tools.LevelRead})
	a, _ := api.ParseTenantToken("a", api.HashToken("ta"))
	srv := httptest.NewServer(api.New(apitest.New(), reg, api.NewTokenAuth(a), api.WithToolStream(10*time.Millisecond, 0)))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, "ta")
	ctx := context.Background()
	run, err := c.CreateRun(ctx, api.CreateRunRequest{Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []api.OutputEvent
	res, err := c.CallToolStream(ctx, run.ID, "talk", nil, func(ev api.OutputEvent) {
		got = append(got, ev)
		if len(got) == 1 {
			close(seen)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.CallTool(ctx, run.ID, "talk", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "talked" || res.IsError || plain.Text() != res.Text() {
		t.Fatalf("streamed result %+v, plain %+v", res, plain)
	}
	if len(got) != 2 || got[0] != (api.OutputEvent{Stream: "stdout", Text: "one\n"}) || got[1] != (api.OutputEvent{Stream: "stderr", Text: "two\n"}) {
		t.Fatalf("output %+v", got)
	}

	// A tool that prints nothing and ends at once: a plain JSON response.
	res, err = c.CallToolStream(ctx, run.ID, "echo_read", json.RawMessage(`{"text":"hi"}`), nil)
	if err != nil || res.Text() != "echo: hi in c1" {
		t.Fatalf("quiet tool: %+v %v", res, err)
	}
	// Errors known before the call keep their class.
	if _, err := c.CallToolStream(ctx, run.ID, "nope", nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := c.CallToolStream(ctx, "no-such-run", "talk", nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
}
