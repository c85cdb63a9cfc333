package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// TestDebugOverHTTP drives a Python debug session through the built daemon
// on Docker, restarts sandboxd while the program is stopped, and carries on
// with the same session from a new run of the conversation.
func TestDebugOverHTTP(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1: the debug adapters live in the sandbox image")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-debug"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-debug"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(run.Tools), "debug") {
		t.Fatalf("run tools %v lack debug", toolNames(run.Tools))
	}
	debug := func(run string, args map[string]any, want ...string) string {
		t.Helper()
		out := mustCall(t, d, run, "debug", args)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("debug %v: answer lacks %q:\n%s", args, w, out)
			}
		}
		return out
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": "requirements.txt", "content": ""})
	const calc = "def double(v):\n    r = v * 2\n    return r\n\nprint('double', double(21))\n"
	mustCall(t, d, run.ID, "write", map[string]any{"path": "calc.py", "content": calc})
	// Positions are found in the file's text, not counted by hand.
	ret, module := toolstest.LineOf(t, calc, "return r"), toolstest.LineOf(t, calc, "print('double'")

	debug(run.ID, map[string]any{"operation": "adapters"}, "debugpy (Python): usable")
	debug(run.ID, map[string]any{"operation": "breakpoints", "file": "calc.py", "lines": []int{ret}}, "sent when you launch")
	debug(run.ID, map[string]any{"operation": "launch", "program": "calc.py"}, "Stopped: breakpoint", fmt.Sprintf("calc.py:%d", ret), "double", "return r")
	if _, err := call(t, d, run.ID, "debug", map[string]any{"operation": "launch", "program": "calc.py"}); err == nil || !strings.Contains(err.Error(), "terminate first") {
		t.Fatalf("a second launch: %v", err)
	}

	d.restart()

	run2, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-debug"})
	if err != nil {
		t.Fatal(err)
	}
	debug(run2.ID, map[string]any{"operation": "stack"}, fmt.Sprintf("double at calc.py:%d", ret), fmt.Sprintf("<module> at calc.py:%d", module))
	debug(run2.ID, map[string]any{"operation": "evaluate", "expression": "r + 1"}, "= 43")
	// continue waits a short grace for the program to end; on a loaded
	// machine the exit may come after it ("Running"), and status says it.
	if out := debug(run2.ID, map[string]any{"operation": "continue"}); !strings.Contains(out, "exited with code 0") {
		if !strings.Contains(out, "Running") {
			t.Fatalf("continue to the end: %s", out)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(debug(run2.ID, map[string]any{"operation": "status"}), "exited with code 0") {
			if time.Now().After(deadline) {
				t.Fatal("the program did not exit within 30 s of continue")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	debug(run2.ID, map[string]any{"operation": "output"}, "double 42")
	debug(run2.ID, map[string]any{"operation": "terminate"}, "Terminated")
	debug(run2.ID, map[string]any{"operation": "status"}, "No debug session")
}
