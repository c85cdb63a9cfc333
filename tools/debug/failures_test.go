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
	line := fileLineOf(t, h, "main.go", "undefinedThing")
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
	h.ok(op("breakpoints", "file", "app.py", "lines", []int{fileLineOf(t, h, "app.py", "# here")}))
	h.ok(op("launch", "program", "app.py"), "Stopped: breakpoint")
	text := h.bad(op("evaluate", "expression", "x +* 2)"), "SyntaxError")
	if strings.Contains(text, "Traceback") || strings.Contains(text, "pydevd") || strings.Count(strings.TrimSpace(text), "\n") > 0 {
		t.Fatalf("want one line with the SyntaxError, got:\n%s", text)
	}
	h.ok(op("evaluate", "expression", "x * 2"), "= 10")
}

// lldb refusing a program that is not an executable: its own complaint is
// in the result.
func TestLLDBLaunchFailureShowsCause(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "cmake_minimum_required(VERSION 3.10)\nproject(n C)\n")
	h.put("notes", "this is not a program\n")
	h.sh("chmod +x " + h.dir + "/notes")
	h.bad(op("launch", "program", "notes"), "Could not create a target")
}

// A binary whose shared library is gone dies in the dynamic loader before
// main: the launch says it ended, with the loader's message and the code.
func TestLLDBMissingLibraryAtStart(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "cmake_minimum_required(VERSION 3.10)\nproject(m C)\n")
	h.put("lib.c", "int answer(void) { return 42; }\n")
	h.put("main.c", "int answer(void);\nint main(void) { return answer(); }\n")
	h.sh("cd " + h.dir + " && gcc -g -shared -fPIC -o libanswer.so lib.c && gcc -g -o app main.c -L. -lanswer -Wl,-rpath,'$ORIGIN' && rm libanswer.so")
	text, _ := h.call(op("launch", "program", "app"))
	for _, w := range []string{"exited with code 127", "libanswer.so"} {
		if !strings.Contains(text, w) {
			t.Fatalf("launch answer lacks %q:\n%s", w, text)
		}
	}
}
