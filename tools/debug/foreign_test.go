package debug_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools/debug"
)

// Another Go program of the same module: never built with crash/.
const foreignOtherGo = `package main

import "fmt"

func main() {
	fmt.Println("other") // OTHER
}
`

// notPlaced checks the launch result's one sentence about the
// breakpoints not placed for the program: it names each of want, and
// nothing calls them placed or tells the model to wait for them to bind.
func notPlaced(t *testing.T, answer string, want ...string) {
	t.Helper()
	var sentence string
	for _, line := range strings.Split(answer, "\n") {
		if strings.HasPrefix(line, "Not placed for this program") {
			if sentence != "" {
				t.Fatalf("more than one sentence about breakpoints not placed:\n%s", answer)
			}
			sentence = line
		}
	}
	if sentence == "" || !strings.HasSuffix(sentence, ".") || strings.Count(sentence, ". ") > 0 {
		t.Fatalf("want one sentence starting \"Not placed for this program\":\n%s", answer)
	}
	for _, w := range want {
		if !strings.Contains(sentence, w) {
			t.Errorf("the sentence about breakpoints not placed lacks %q:\n%s", w, sentence)
		}
	}
	for _, bad := range []string{"Unverified", "bind once the code loads", "set at"} {
		if strings.Contains(answer, bad) {
			t.Errorf("the answer says %q of breakpoints this program cannot hit:\n%s", bad, answer)
		}
	}
}

// Breakpoints left from other programs and languages (the conversation
// keeps them across sessions) cannot stop the program launched now: the
// launch returns at its program's own stop, or "Running" after the short
// grace, never after the stop wait (10 minutes here), and says in one
// sentence which breakpoints were not placed and why. On every adapter.
func TestForeignBreakpointsDoNotHoldLaunch(t *testing.T) {
	t.Run("delve", func(t *testing.T) {
		h := newHarness(t, debug.WithStopWait(10*time.Minute))
		h.sh("mkdir -p " + h.dir + "/crash " + h.dir + "/other " + h.dir + "/tools")
		h.put("go.mod", "module example.com/p\n\ngo 1.22\n")
		h.put("crash/main.go", panicGo)
		h.put("other/main.go", foreignOtherGo)
		h.put("tools/requirements.txt", "")
		h.put("tools/fetch.py", loopProgram)
		h.ok(op("breakpoints", "file", "tools/fetch.py", "lines", []int{h.line("tools/fetch.py", "n += 1")}))
		h.ok(op("breakpoints", "file", "other/main.go", "lines", []int{h.line("other/main.go", "OTHER")}))
		text := h.callBefore(2*time.Minute, op("launch", "program", "crash/main.go"), "Stopped: exception", "nil map", h.at("crash/main.go", "BOOM"))
		notPlaced(t, text,
			h.at("tools/fetch.py", "n += 1")+" (Python code; delve debugs Go)",
			h.at("other/main.go", "OTHER")+" (could not find file other/main.go)")
	})
	t.Run("debugpy", func(t *testing.T) {
		h := newHarness(t, debug.WithStopWait(10*time.Minute))
		h.sh("mkdir -p " + h.dir + "/crash")
		h.put("requirements.txt", "")
		h.put("loop.py", loopProgram)
		h.put("crash/main.go", panicGo)
		h.put("spin.c", spinC)
		// debugpy calls a breakpoint in any existing file verified.
		h.ok(op("breakpoints", "file", "crash/main.go", "lines", []int{h.line("crash/main.go", "BOOM")}))
		h.ok(op("breakpoints", "file", "spin.c", "lines", []int{h.line("spin.c", "SPIN")}))
		text := h.callBefore(2*time.Minute, op("launch", "program", "loop.py"), "Launched loop.py with debugpy", "Running")
		notPlaced(t, text,
			h.at("crash/main.go", "BOOM")+" (Go code; debugpy debugs Python)",
			h.at("spin.c", "SPIN")+" (C code; debugpy debugs Python)")
		// Set during the session, such a breakpoint is kept for later and
		// does not hold a continue either.
		h.ok(op("breakpoints", "file", "crash/main.go", "lines", []int{h.line("crash/main.go", "start")}),
			"saved for a later launch, not placed in this debugpy session (Go code; debugpy debugs Python)")
		h.ok(op("pause"), "Stopped: pause", "loop.py:")
		h.callBefore(2*time.Minute, op("continue"), "Running")
	})
	t.Run("lldb", func(t *testing.T) {
		h := newHarness(t, debug.WithStopWait(10*time.Minute))
		h.sh("mkdir -p " + h.dir + "/crash")
		h.put("CMakeLists.txt", "")
		h.put("spin.c", spinC)
		h.put("crash/main.go", panicGo)
		h.put("app.py", loopProgram)
		h.sh("cd " + h.dir + " && gcc -g -O0 -o spin spin.c")
		h.ok(op("breakpoints", "file", "crash/main.go", "lines", []int{h.line("crash/main.go", "BOOM")}))
		h.ok(op("breakpoints", "file", "app.py", "lines", []int{h.line("app.py", "n += 1")}))
		text := h.callBefore(2*time.Minute, op("launch", "program", "spin"), "Launched spin with lldb", "Running")
		notPlaced(t, text,
			h.at("app.py", "n += 1")+" (Python code; lldb debugs C, C++ and Rust)",
			fmt.Sprintf("%s (lldb found no code there)", h.at("crash/main.go", "BOOM")))
	})
}
