package tools

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// The run's workdir is found one way for every family: relative from the
// workspace, the documented /workspace mapped onto a workspace elsewhere,
// and an absolute one outside the workspace clamped to its root.
func TestWorkdir(t *testing.T) {
	for _, tc := range []struct{ ws, wd, want string }{
		{"/workspace", "", "/workspace"},
		{"/workspace", "/workspace", "/workspace"},
		{"/workspace", "src", "/workspace/src"},
		{"/workspace", "/workspace/src/", "/workspace/src"},
		{"/workspace", "/etc", "/workspace"},
		{"/workspace", "/workspacex", "/workspace"},
		{"/data/ws/c1", "/workspace", "/data/ws/c1"},
		{"/data/ws/c1", "/workspace/app", "/data/ws/c1/app"},
		{"/data/ws/c1", "/data/ws/c1/app", "/data/ws/c1/app"},
		{"/data/ws/c1", "/data/ws/c2", "/data/ws/c1"},
		{"/data/ws/c1/", "app", "/data/ws/c1/app"},
	} {
		if got := Workdir(tc.ws, tc.wd); got != tc.want {
			t.Errorf("Workdir(%q, %q) = %q, want %q", tc.ws, tc.wd, got, tc.want)
		}
	}
}

// Resolve confines paths to the workspace by one rule and says, in one
// error message, what was wrong; Rel shows paths the way the model gives them.
func TestResolveAndRel(t *testing.T) {
	c := &SandboxConn{Workspace: "/workspace", Workdir: "/workspace/app"}
	for p, want := range map[string]string{
		"main.go":                  "/workspace/app/main.go",
		"../lib/x.go":              "/workspace/lib/x.go",
		"/workspace/a/../b":        "/workspace/b",
		".":                        "/workspace/app",
		"..":                       "/workspace",
		"/workspace":               "/workspace",
		"sub/../../../workspace/z": "/workspace/z",
	} {
		got, err := c.Resolve("path", p)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for p, want := range map[string][]string{
		"/etc/passwd":     {`path "/etc/passwd" is outside the workspace /workspace`},
		"/workspacex/a":   {"is outside the workspace /workspace"},
		"../../etc/x":     {"leaves the workspace /workspace", "from the workdir /workspace/app", "/etc/x, which is outside the workspace"},
		"~/.ssh/id_rsa":   {"uses ~"},
		"a\x00b":          {"NUL byte"},
		"../../workspace": {},
	} {
		_, err := c.Resolve("path", p)
		if len(want) == 0 {
			if err != nil {
				t.Errorf("Resolve(%q): %v", p, err)
			}
			continue
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Resolve(%q) = %v, want invalid argument", p, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Resolve(%q) = %q, want it to say %q", p, err, w)
			}
		}
	}
	for abs, want := range map[string]string{
		"/workspace/app":        ".",
		"/workspace/app/x/y.go": "x/y.go",
		"/workspace/lib/z.go":   "/workspace/lib/z.go",
		"/workspace/appx":       "/workspace/appx",
		"/usr/lib/go/fmt.go":    "/usr/lib/go/fmt.go",
	} {
		if got := c.Rel(abs); got != want {
			t.Errorf("Rel(%q) = %q, want %q", abs, got, want)
		}
	}
}

// Open gives the handle with the clamped workdir; a vanished sandbox is a
// result the model reads, counted as a failure, never a Go error (which
// the registry would turn into "internal error").
func TestOpen(t *testing.T) {
	env := &Env{
		Run:        &Run{Workdir: "/workspace/app"},
		HasSandbox: true,
		Sandbox: func(context.Context) (*SandboxConn, error) {
			return &SandboxConn{ID: "sb", Workspace: "/data/ws/c1/"}, nil
		},
	}
	c, res, err := Open(context.Background(), env)
	if err != nil || res != nil || c.Workspace != "/data/ws/c1" || c.Workdir != "/data/ws/c1/app" {
		t.Fatalf("Open = %+v, %v, %v", c, res, err)
	}
	gone := errdefs.NotFound("the sandbox of conversation c1 no longer exists (it was removed outside sandboxd); create a new one")
	env.Sandbox = func(context.Context) (*SandboxConn, error) { return nil, gone }
	c, res, err = Open(context.Background(), env)
	if err != nil || c != nil || res == nil || !res.IsError || !strings.Contains(res.Text(), "no longer exists") {
		t.Fatalf("Open of a removed sandbox = %+v, %+v, %v", c, res, err)
	}
	if got := resultOutcome(context.Background(), *res); got != OutcomeFailure {
		t.Errorf("a removed sandbox counts as %q, want %q", got, OutcomeFailure)
	}
	env.Sandbox = func(context.Context) (*SandboxConn, error) { return nil, errors.New("boom") }
	if _, res, err = Open(context.Background(), env); err == nil || res != nil {
		t.Errorf("an unclassed error: %+v, %v; want the Go error", res, err)
	}
}
