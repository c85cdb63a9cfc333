package debug_test

import (
	"strconv"
	"strings"
	"testing"
)

// A Go program that does not compile: the launch fails with the
// compiler's message, file:line included, not a pointer to a console.
func TestDelveBuildErrorShowsCompiler(t *testing.T) {
	h := newHarness(t)
	h.put("go.mod", "module example.com/broken\n\ngo 1.22\n")
	h.put("main.go", "package main\n\nfunc main() {\n\tx := undefinedThing + 1\n\t_ = x\n}\n")
	line := lineOf(t, h, "main.go", "undefinedThing")
	text := h.bad(op("launch", "program", "main.go"), "undefined: undefinedThing")
	if !strings.Contains(text, "main.go:"+strconv.Itoa(line)) {
		t.Fatalf("the compiler's file:line (main.go:%d) is missing:\n%s", line, text)
	}
	if strings.Contains(text, "debug console") {
		t.Errorf("the answer points at a debug console:\n%s", text)
	}
	h.ok(op("status"), "No debug session")
}

// A Python program whose import fails at start: the launch says which
// import and why.
func TestPythonImportErrorAtStart(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("app.py", "import not_installed_anywhere_xyz\n\nprint('unreachable')\n")
	text, _ := h.call(op("launch", "program", "app.py"))
	for _, w := range []string{"ModuleNotFoundError", "not_installed_anywhere_xyz"} {
		if !strings.Contains(text, w) {
			t.Fatalf("launch answer lacks %q:\n%s", w, text)
		}
	}
}

// A syntax error in evaluate is one line with the user's error, not
// pydevd's traceback.
func TestPythonEvaluateSyntaxError(t *testing.T) {
	h := newHarness(t)
	h.put("requirements.txt", "")
	h.put("app.py", "x = 5\nprint(x)  # here\n")
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{lineOf(t, h, "app.py", "# here")}))
	h.ok(op("launch", "program", "app.py"), "Stopped: breakpoint")
	text := h.bad(op("evaluate", "expression", "x +* 2)"), "SyntaxError")
	if strings.Contains(text, "Traceback") || strings.Contains(text, "pydevd") || strings.Count(strings.TrimSpace(text), "\n") > 0 {
		t.Fatalf("want one line with the SyntaxError, got:\n%s", text)
	}
	h.ok(op("evaluate", "expression", "x * 2"), "= 10")
}
