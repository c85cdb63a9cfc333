package debug_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools/debug"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// callBefore runs an operation that must return (without is_error) before
// deadline; the stop wait of these harnesses is far longer, so a result
// that waited for it misses the deadline.
func (h *harness) callBefore(deadline time.Duration, args map[string]any, want ...string) string {
	h.t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := h.reg.Call(ctx, h.env, "debug", raw)
	if err != nil {
		h.t.Fatalf("debug %v: Go error %v", args, err)
	}
	if ctx.Err() != nil {
		h.t.Fatalf("debug %v did not answer within %s (it waited for a stop that nothing asked for):\n%s", args, deadline, res.Text())
	}
	if res.IsError {
		h.t.Fatalf("debug %v failed:\n%s", args, res.Text())
	}
	for _, w := range want {
		if !strings.Contains(res.Text(), w) {
			h.t.Fatalf("debug %v: answer lacks %q:\n%s", args, w, res.Text())
		}
	}
	return res.Text()
}

// A launch without breakpoints returns once the program runs, and a
// continue on a program that runs on reports that it is running, without
// waiting the stop wait out.
func TestLaunchAnswersRunning(t *testing.T) {
	h := newHarness(t, debug.WithStopWait(10*time.Minute))
	h.put("requirements.txt", "")
	h.put("loop.py", loopProgram)
	h.callBefore(2*time.Minute, op("launch", "program", "loop.py"), "Launched loop.py with debugpy", "Running")
	h.ok(op("pause"), "Stopped: pause", "loop.py:")
	h.callBefore(2*time.Minute, op("continue"), "Running")
	h.ok(op("status"), "Running")
}

// The same on delve: a breakpoint right after the start is still the
// stop, and continue once it is cleared says running.
func TestDelveContinueRunsOn(t *testing.T) {
	h := newHarness(t, debug.WithStopWait(10*time.Minute))
	h.put("go.mod", "module example.com/spin\n\ngo 1.22\n")
	h.put("main.go", "package main\n\nimport \"time\"\n\nfunc main() {\n\tn := 0\n\tfor {\n\t\tn++ // tick\n\t\ttime.Sleep(10 * time.Millisecond)\n\t}\n}\n")
	line := fileLineOf(t, h, "main.go", "// tick")
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{line}))
	h.ok(op("launch", "program", "main.go"), "Stopped: breakpoint", "main.main")
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{}), "Cleared")
	h.callBefore(2*time.Minute, op("continue"), "Running")
	h.ok(op("pause"), "Stopped")
}

// A program that ends right after the start: the launch says so, with the
// exit code and what it printed.
func TestLaunchReportsQuickExit(t *testing.T) {
	h := newHarness(t, debug.WithStopWait(10*time.Minute))
	h.put("CMakeLists.txt", "cmake_minimum_required(VERSION 3.10)\nproject(q C)\nadd_executable(q q.c)\n")
	h.put("q.c", "#include <stdio.h>\nint main(void) { puts(\"quick-bye\"); return 4; }\n")
	h.sh("cd " + h.dir + " && gcc -g -O0 -o q q.c")
	h.callBefore(2*time.Minute, op("launch", "program", "q"), "exited with code 4", "quick-bye")
	h.ok(op("output"), "quick-bye")
}

// fileLineOf is the 1-based line of the file rel, as the sandbox holds it,
// that holds marker (toolstest.LineOf: it must occur once).
func fileLineOf(t *testing.T, h *harness, rel, marker string) int {
	t.Helper()
	return toolstest.LineOf(t, h.sh("cat "+h.dir+"/"+rel), marker)
}

// A breakpoint in a file the program never loads (another module) cannot
// stop it: the launch does not wait for it.
func TestDelveUnplacedBreakpointDoesNotHoldLaunch(t *testing.T) {
	h := newHarness(t, debug.WithStopWait(10*time.Minute))
	h.put("go.mod", "module example.com/spin\n\ngo 1.22\n")
	h.put("main.go", "package main\n\nimport \"time\"\n\nfunc main() {\n\tfor {\n\t\ttime.Sleep(10 * time.Millisecond)\n\t}\n}\n")
	h.sh("mkdir -p " + h.dir + "/elsewhere")
	h.put("elsewhere/go.mod", "module example.com/elsewhere\n\ngo 1.22\n")
	h.put("elsewhere/x.go", "package elsewhere\n\nfunc X() int {\n\treturn 1 // never\n}\n")
	h.ok(op("breakpoints", "file", "elsewhere/x.go", "lines", []int{fileLineOf(t, h, "elsewhere/x.go", "// never")}))
	h.callBefore(2*time.Minute, op("launch", "program", "main.go"), "Launched main.go with delve", "Running")
}
