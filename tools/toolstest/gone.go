package toolstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// Managed is the sandbox accessor serve wires (api's envOf) for the
// conversation's sandbox held by m: the agent pipe the manager opens, with
// the sandbox as the manager last saw it.
func Managed(m *sandbox.Manager, tenant, conversation string) func(context.Context) (*tools.SandboxConn, error) {
	return func(ctx context.Context) (*tools.SandboxConn, error) {
		c, info, err := m.Agent(ctx, tenant, conversation)
		if err != nil {
			return nil, err
		}
		return &tools.SandboxConn{ID: info.ID, Backend: info.Backend, Workspace: info.Workspace, Agent: c}, nil
	}
}

// WantGone checks that a call's result reports the conversation's sandbox
// as gone, in the sandbox manager's error message ("no longer exists" for the
// first call to find it gone, "has no sandbox" once the manager forgot
// it), and not as sandboxd's internal error.
func WantGone(t testing.TB, what string, res tools.Result) {
	t.Helper()
	text := res.Text()
	switch {
	case !res.IsError:
		t.Fatalf("%s on a removed sandbox succeeded:\n%s", what, text)
	case strings.Contains(text, "internal error"):
		t.Fatalf("%s on a removed sandbox answers an internal error:\n%s", what, text)
	case !strings.Contains(text, "no longer exists") && !strings.Contains(text, "is gone") && !strings.Contains(text, "has no sandbox"):
		t.Fatalf("%s on a removed sandbox does not say it is gone:\n%s", what, text)
	}
}

// Vanishing is a sandbox of its own for a test that removes it behind
// sandboxd's back: a Manager on the test's backend holding one sandbox (of
// the backend's default image) for a conversation of a fresh tenant. Its
// cleanup deletes the sandbox if the test left it, then closes the
// Manager. The backend is the test's to pick (a tool's test passes
// dockertest.Backend), so this package names no engine.
type Vanishing struct {
	M            *sandbox.Manager
	Tenant       string
	Conversation string
	Info         sandbox.Info
	b            sandbox.Backend
}

// NewVanishing starts the sandbox on b.
func NewVanishing(t *testing.T, b sandbox.Backend) *Vanishing {
	t.Helper()
	m := sandbox.NewManager(b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	v := &Vanishing{M: m, Tenant: fmt.Sprintf("vanish-%d", time.Now().UnixNano()%1e9), Conversation: "c-vanish", b: b}
	var err error
	v.Info, err = m.Create(ctx, sandbox.Spec{Tenant: v.Tenant, Conversation: v.Conversation})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Delete(c, v.Tenant, v.Info.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
		m.Close()
	})
	return v
}

// Env is a run of the sandbox's conversation with the accessor serve
// wires; workdir "" is the workspace root.
func (v *Vanishing) Env(runID, workdir string) *tools.Env {
	return &tools.Env{
		Run: &tools.Run{ID: runID, Tenant: v.Tenant, Conversation: v.Conversation,
			Surface: tools.SurfaceDefault, Workdir: workdir},
		HasSandbox: true,
		Sandbox:    Managed(v.M, v.Tenant, v.Conversation),
	}
}

// Remove removes the sandbox with the backend itself, behind the Manager's
// back as an operator's `docker rm -f` would, and waits until the Manager's
// open pipe to it has ended, so that the next call finds it gone rather
// than racing the pipe's end.
func (v *Vanishing) Remove(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := v.M.Agent(ctx, v.Tenant, v.Conversation)
	if err != nil {
		t.Fatalf("the sandbox before its removal: %v", err)
	}
	if err := v.b.Remove(ctx, v.Info.ID); err != nil {
		t.Fatalf("removing the sandbox %s behind the Manager's back: %v", v.Info.ID, err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the agent pipe did not end within a minute of the sandbox's removal")
	}
}
