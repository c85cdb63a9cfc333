package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// backends lists the backends these tests run on here: host always,
// docker when SANDBOXD_TEST_DOCKER=1.
func backends(t *testing.T) []string {
	b := []string{"host"}
	if os.Getenv("SANDBOXD_TEST_DOCKER") == "1" {
		b = append(b, "docker")
	}
	return b
}

// dockerImage is the image docker sandboxes use in these tests.
func dockerImage() string {
	if img := os.Getenv("SANDBOXD_TEST_IMAGE"); img != "" {
		return img
	}
	return "sandboxd-base:bookworm"
}

func createReq(backend, conv string) api.CreateSandboxRequest {
	r := api.CreateSandboxRequest{Conversation: conv}
	if backend == "docker" {
		r.Image = dockerImage()
	}
	return r
}

// call invokes a tool and returns its text; is_error is reported as a Go
// error carrying the text so tests can match the error message.
func call(t *testing.T, d *daemon, run, tool string, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Client.CallTool(ctx(t), run, tool, raw)
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New(res.Text())
	}
	return res.Text(), nil
}

func mustCall(t *testing.T, d *daemon, run, tool string, args any) string {
	t.Helper()
	out, err := call(t, d, run, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out
}

func toolNames(specs []api.ToolSpec) []string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return n
}

// TestFileToolsOverHTTP is the platform's path end to end: create a
// sandbox, open a run, see the file tools, and use each of them.
func TestFileToolsOverHTTP(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-files"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			if sb.Conversation != "conv-files" || sb.Backend != backend || sb.State != "running" {
				t.Fatalf("created sandbox = %+v", sb)
			}

			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-files"})
			if err != nil {
				t.Fatal(err)
			}
			names := toolNames(run.Tools)
			for _, want := range []string{"read", "write", "edit", "apply_patch", "shell", "process"} {
				if !slices.Contains(names, want) {
					t.Fatalf("run tools %v lack %q", names, want)
				}
			}

			mustCall(t, d, run.ID, "write", map[string]any{"path": "src/hello.txt", "content": "alpha\nbeta\ngamma\n"})
			out := mustCall(t, d, run.ID, "read", map[string]any{"path": "src/hello.txt"})
			if !strings.Contains(out, "beta") || !strings.Contains(out, "2") {
				t.Fatalf("read = %q, want numbered lines with beta", out)
			}
			mustCall(t, d, run.ID, "edit", map[string]any{"path": "src/hello.txt", "old": "beta", "new": "BETA"})
			out = mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat src/hello.txt; echo done-$((40+2))"})
			if !strings.Contains(out, "BETA") || !strings.Contains(out, "done-42") {
				t.Fatalf("shell = %q, want the edited file and done-42", out)
			}

			patch := "--- a/src/hello.txt\n+++ b/src/hello.txt\n@@ -1,3 +1,3 @@\n alpha\n-BETA\n+beta again\n gamma\n" +
				"--- /dev/null\n+++ b/src/new.txt\n@@ -0,0 +1 @@\n+fresh\n"
			mustCall(t, d, run.ID, "apply_patch", map[string]any{"patch": patch})
			out = mustCall(t, d, run.ID, "shell", map[string]any{"command": "cat src/hello.txt src/new.txt"})
			if !strings.Contains(out, "beta again") || !strings.Contains(out, "fresh") {
				t.Fatalf("after patch: %q", out)
			}

			// A patch whose second file does not apply writes nothing.
			bad := "--- a/src/hello.txt\n+++ b/src/hello.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta again\n+changed\n gamma\n" +
				"--- a/src/new.txt\n+++ b/src/new.txt\n@@ -1 +1 @@\n-not the content\n+x\n"
			if _, err := call(t, d, run.ID, "apply_patch", map[string]any{"patch": bad}); err == nil {
				t.Fatal("a patch with a failing hunk was applied")
			}
			out = mustCall(t, d, run.ID, "read", map[string]any{"path": "src/hello.txt"})
			if strings.Contains(out, "changed") {
				t.Fatalf("a failed patch changed the first file: %q", out)
			}

			// Escapes are refused with an error message, and nothing outside
			// is touched.
			for _, p := range []string{"../../etc/passwd", "/etc/passwd", "src/../../x"} {
				if _, err := call(t, d, run.ID, "read", map[string]any{"path": p}); err == nil {
					t.Fatalf("read %q was allowed", p)
				}
			}
			if _, err := call(t, d, run.ID, "shell", map[string]any{"command": "ln -s / rootlink"}); err != nil {
				t.Fatal(err)
			}
			if _, err := call(t, d, run.ID, "read", map[string]any{"path": "rootlink/etc/hostname"}); err == nil {
				t.Fatal("read through a symlink to / was allowed")
			}
		})
	}
}

// TestSurfacesAndValidation checks what a plan run sees, that hidden tools
// get 404 and that bad arguments come back as is_error results.
func TestSurfacesAndValidation(t *testing.T) {
	d := startDaemon(t, "host", t.TempDir())
	if _, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-plan")); err != nil {
		t.Fatal(err)
	}
	plan, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-plan", Surface: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Tools {
		if s.Level != "read" {
			t.Fatalf("plan run lists %s of level %s", s.Name, s.Level)
		}
	}
	if !slices.Contains(toolNames(plan.Tools), "read") {
		t.Fatalf("plan run lacks read: %v", toolNames(plan.Tools))
	}
	_, err = d.Client.CallTool(ctx(t), plan.ID, "write", json.RawMessage(`{"path":"x","content":"y"}`))
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("write in a plan run: err = %v, want not_found", err)
	}

	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-plan"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, field string
	}{
		{`{"path": 5}`, "path"},
		{`{}`, "path"},
		{`{"path": "a", "pth": "b"}`, "pth"},
		{`{"path": "a", "limit": "ten"}`, "limit"},
	} {
		res, err := d.Client.CallTool(ctx(t), run.ID, "read", json.RawMessage(tc.args))
		if err != nil {
			t.Fatalf("read %s: %v", tc.args, err)
		}
		if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, `"`+tc.field+`"`) {
			t.Fatalf("read %s = %+v, want is_error naming %q", tc.args, res, tc.field)
		}
	}
	_, err = d.Client.CallTool(ctx(t), run.ID, "no_such_tool", json.RawMessage(`{}`))
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown tool: %v", err)
	}
	_, err = d.Client.CallTool(ctx(t), "run-that-does-not-exist", "read", json.RawMessage(`{"path":"a"}`))
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
}

// TestNoSandboxNoTools: a conversation without a sandbox sees no sandbox
// tools, and calling one creates nothing.
func TestNoSandboxNoTools(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			before := countSandboxes(t, backend, d)
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-empty"})
			if err != nil {
				t.Fatal(err)
			}
			if n := toolNames(run.Tools); slices.Contains(n, "read") || slices.Contains(n, "shell") {
				t.Fatalf("run without a sandbox lists %v", n)
			}
			for _, tool := range []string{"read", "shell", "write"} {
				_, err := d.Client.CallTool(ctx(t), run.ID, tool, json.RawMessage(`{"path":"a","command":"true","content":""}`))
				if !errors.Is(err, errdefs.ErrNotFound) {
					t.Fatalf("%s without a sandbox: err = %v, want not_found", tool, err)
				}
			}
			if after := countSandboxes(t, backend, d); after != before {
				t.Fatalf("sandboxes before %d, after tool calls %d: a tool call created one", before, after)
			}
			list, err := d.Client.ListSandboxes(ctx(t), "conv-empty")
			if err != nil || len(list) != 0 {
				t.Fatalf("list conv-empty = %v, %v", list, err)
			}
		})
	}
}

// TestRestartFindsSandbox: a restarted sandboxd finds the sandbox from the
// backend's labels, and work done before the restart is still there,
// including a process started before it.
func TestRestartFindsSandbox(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := startDaemon(t, backend, t.TempDir())
			sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-restart"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
			run, _ := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-restart"})
			mustCall(t, d, run.ID, "write", map[string]any{"path": "kept.txt", "content": "still here\n"})
			mustCall(t, d, run.ID, "shell", map[string]any{"command": "setsid sh -c 'echo $$ > bg.pid; exec sleep 600' >/dev/null 2>&1 < /dev/null &"})
			waitFor(t, 10*time.Second, "background pid file", func() error {
				_, err := call(t, d, run.ID, "read", map[string]any{"path": "bg.pid"})
				return err
			})

			d.restart()

			got, err := d.Client.GetSandbox(ctx(t), sb.ID)
			if err != nil {
				t.Fatalf("after restart, GET sandbox: %v", err)
			}
			if got.Conversation != "conv-restart" || got.State != "running" {
				t.Fatalf("after restart: %+v", got)
			}
			// The run made before the restart is served again (the run file).
			if out := mustCall(t, d, run.ID, "read", map[string]any{"path": "kept.txt"}); !strings.Contains(out, "still here") {
				t.Fatalf("the run of before the restart, read = %q", out)
			}
			run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-restart"})
			if err != nil {
				t.Fatal(err)
			}
			if out := mustCall(t, d, run2.ID, "read", map[string]any{"path": "kept.txt"}); !strings.Contains(out, "still here") {
				t.Fatalf("after restart read = %q", out)
			}
			out := mustCall(t, d, run2.ID, "shell", map[string]any{"command": "kill -0 $(cat bg.pid) && echo alive"})
			if !strings.Contains(out, "alive") {
				t.Fatalf("the process started before the restart is gone: %q", out)
			}
			if _, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-restart")); !errors.Is(err, errdefs.ErrConflict) {
				t.Fatalf("second sandbox for the conversation after restart: %v, want conflict", err)
			}
		})
	}
}

func countSandboxes(t *testing.T, backend string, d *daemon) int {
	t.Helper()
	if backend == "docker" {
		return countContainers(t)
	}
	entries, err := os.ReadDir(fmt.Sprintf("%s/sandboxes", d.dataDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}
