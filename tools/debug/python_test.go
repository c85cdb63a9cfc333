package debug_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

const pyProgram = `import sys

def compute(a, b):
    big = {"k%02d" % i: i for i in range(60)}
    long_text = "x" * 10000
    total = a + b
    return total

def main():
    print("starting")
    r = compute(2, 3)
    print("result", r)
    sys.stderr.write("to stderr\n")
    sys.exit(7)

main()
`

// A Python session end to end: breakpoints before launch, the stop, stack,
// scopes, capped variables, evaluate, the three steps, output and the exit
// code.
func TestPythonSession(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("app.py", pyProgram)

	h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "total = a + b")}), "saved", "sent when you launch")
	text := h.ok(op("launch", "program", "app.py"), "debugpy", "Stopped: breakpoint", h.at("app.py", "total = a + b"), "compute", "total = a + b")
	frame := num(t, text, "[frame ")

	stack := h.ok(op("stack"), "#0", "compute at "+h.at("app.py", "total = a + b"), "#1", "main at "+h.at("app.py", "r = compute(2, 3)"), "r = compute(2, 3)")
	if module := fmt.Sprintf("<module> at app.py:%d", toolstest.PosOf(t, pyProgram, "\nmain()", 1).Line); !strings.Contains(stack, module) {
		t.Errorf("stack lacks the module frame:\n%s", stack)
	}
	scopes := h.ok(op("scopes", "frame_id", frame), "Locals")
	locals := h.ok(op("variables", "reference", refOf(t, scopes, "Locals")), "a (int) = 2", "b (int) = 3")
	if !strings.Contains(locals, "long_text (str) = 'xxxx") || !strings.Contains(locals, "more characters)") {
		t.Errorf("a 10 kB string is not capped at 400 characters:\n%s", locals)
	}
	for _, line := range strings.Split(locals, "\n") {
		if strings.HasPrefix(line, "- long_text") && len(line) > 600 {
			t.Errorf("long_text line is %d bytes long; want the value capped at 400 characters", len(line))
		}
	}
	big := h.ok(op("variables", "reference", refOf(t, locals, "big")), "more not shown (cap 50)")
	if n := strings.Count(big, "\n- "); n != 50 {
		t.Errorf("dict with 60 keys shows %d children, want 50:\n%s", n, big)
	}
	h.ok(op("evaluate", "expression", "a * 10 + b", "frame_id", frame), "= 23")
	h.ok(op("evaluate", "expression", "len(big)"), "= 60")

	h.ok(op("step_over"), "Stopped: step", h.at("app.py", "return total"), "return total")
	h.ok(op("step_out"), "Stopped: step", h.at("app.py", "r = compute(2, 3)"), "main")
	h.ok(op("step_over"), h.at("app.py", `print("result", r)`), `print("result", r)`)
	h.ok(op("step_in"), "Stopped: step") // print is a builtin: step_in moves to the next line
	out := h.ok(op("output"), "starting")
	if strings.Contains(out, "frozen modules") {
		t.Errorf("the debugger's own warnings reached the program output:\n%s", out)
	}
	if strings.Contains(out, "starting") && strings.Contains(h.ok(op("output")), "starting") {
		t.Errorf("output returned the same bytes twice")
	}
	// debugpy stops on a SystemExit with a non-zero code, as in an editor.
	h.ok(op("continue"), "Stopped: exception", "SystemExit", "sys.exit(7)")
	h.ok(op("continue"), "exited with code 7")
	h.ok(op("output"), "to stderr")
	h.ok(op("terminate"), "Terminated", "exit code 7")
	h.ok(op("status"), "No debug session")
}

// step_in enters a called function.
func TestPythonStepIn(t *testing.T) {
	h := newHarness(t)
	h.put("pyproject.toml", "[project]\nname = \"x\"\n")
	h.put("app.py", pyProgram)
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "r = compute(2, 3)")}))
	h.ok(op("launch", "program", "app.py"), h.at("app.py", "r = compute(2, 3)"), "main")
	h.ok(op("step_in"), h.at("app.py", "big = {"), "compute") // the first line of its body
}

// An uncaught exception stops the program where it is raised.
func TestPythonUncaughtException(t *testing.T) {
	h := newHarness(t)
	h.put("setup.py", "")
	h.put("boom.py", "def f(d):\n    return 1 / d\n\nf(0)\n")
	h.ok(op("launch", "program", "boom.py"), "Stopped: exception", "ZeroDivisionError", h.at("boom.py", "return 1 / d"), "return 1 / d")
}

// A project .venv is used: the debuggee imports a module only the venv has.
func TestPythonVenv(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.sh("cd " + h.dir + " && python3 -m venv --system-site-packages .venv && " +
		`sp=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && ` +
		`printf 'WHERE = "venv"\n' > "$sp/onlyinvenv.py"`)
	h.put("app.py", "import sys\nimport onlyinvenv\nprint(onlyinvenv.WHERE, sys.prefix)\nx = 1\n")
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "x = 1")}))
	h.ok(op("launch", "program", "app.py"), "Stopped: breakpoint", h.at("app.py", "x = 1"))
	h.outputHas("venv", "/.venv")
	h.ok(op("evaluate", "expression", "onlyinvenv.WHERE"), "'venv'")
}

// outputHas reads the debuggee's output until it has shown every want: the
// adapter sends a print's output event on its own, so it may come a moment
// after the stop that followed the print.
func (h *harness) outputHas(want ...string) {
	h.t.Helper()
	var seen strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, isErr := h.call(op("output"))
		if isErr {
			h.t.Fatalf("debug output: %s", out)
		}
		seen.WriteString(out)
		missing := ""
		for _, w := range want {
			if !strings.Contains(seen.String(), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the debuggee's output lacks %q after 10 s:\n%s", missing, seen.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
