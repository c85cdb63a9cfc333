package api

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// The handler's one lookup is passed down: the run's workdir is mapped
// onto the sandbox's workspace, and the tools' accessor opens the pipe of
// the sandbox looked up (one manager call per open), never another one.
func TestEnvPassesTheLookupDown(t *testing.T) {
	f := newLeaky()
	f.workspace = "/data/ws/c1"
	info, err := f.Create(context.Background(), sandbox.Spec{Tenant: "t1", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{sandboxes: f}
	ctx := context.Background()
	env := s.envOf(ctx, tools.Run{Tenant: "t1", Conversation: "c1", Workdir: "/workspace/app"}, &info)
	if env.Run.Workdir != "/data/ws/c1/app" {
		t.Errorf("workdir %q, want /workspace/app mapped onto the sandbox's workspace", env.Run.Workdir)
	}
	if f.agentCalls != 0 {
		t.Fatalf("building the env opened %d pipes; it must open none", f.agentCalls)
	}
	conn, res, err := tools.Open(ctx, env)
	if err != nil || res != nil || conn.ID != info.ID || conn.Workdir != "/data/ws/c1/app" || f.agentCalls != 1 {
		t.Fatalf("Open = %+v, %+v, %v after %d agent calls", conn, res, err, f.agentCalls)
	}

	// The conversation's sandbox replaced after the lookup: the call is
	// told its sandbox is gone rather than handed the other one.
	f.mu.Lock()
	delete(f.byID, info.ID)
	f.byID["sb-new"] = sandbox.Info{ID: "sb-new", Tenant: "t1", Conversation: "c1", Workspace: "/data/ws/other"}
	f.mu.Unlock()
	_, err = env.Sandbox(ctx)
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("a replaced sandbox = %v, want not_found saying it is gone", err)
	}

	// No sandbox at the lookup: the accessor says so without asking the manager.
	calls := f.agentCalls
	none := s.envOf(ctx, tools.Run{Tenant: "t1", Conversation: "c2"}, nil)
	if _, err := none.Sandbox(ctx); !errors.Is(err, errdefs.ErrNotFound) || f.agentCalls != calls {
		t.Errorf("no sandbox: %v after %d more agent calls", err, f.agentCalls-calls)
	}
}
