package debug_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

const goProgram = `package main

import (
	"fmt"
	"sync"
)

func worker(id int, out chan<- int) {
	square := id * id
	out <- square
}

func main() {
	out := make(chan int, 4)
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			worker(n, out)
		}(i)
	}
	wg.Wait()
	close(out)
	sum := 0
	for v := range out {
		sum += v
	}
	fmt.Println("sum", sum)
}
`

// Go with delve: a breakpoint inside a goroutine, threads, stack,
// variables, then running to the exit.
func TestGoDelve(t *testing.T) {
	h := newHarness(t)
	h.put("go.mod", "module example.com/dbg\n\ngo 1.22\n")
	h.put("main.go", goProgram)
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{h.line("main.go", "out <- square")}))
	text := h.ok(op("launch", "program", "main.go"), "delve", "Stopped: breakpoint", h.at("main.go", "out <- square"), "main.worker", "out <- square")
	frame := num(t, text, "[frame ")
	threads := h.ok(op("threads"), "stopped here (breakpoint)")
	if strings.Count(threads, "\n- ") < 2 {
		t.Errorf("want several goroutines listed:\n%s", threads)
	}
	h.ok(op("stack"), "#0", "main.worker at "+h.at("main.go", "out <- square"), "main.main.func1 at "+h.at("main.go", "worker(n, out)"), "worker(n, out)")
	scopes := h.ok(op("scopes", "frame_id", frame), "Locals")
	// delve lists arguments with the locals.
	h.ok(op("variables", "reference", refOf(t, scopes, "Locals")), "square (int) = ", "id (int) = ")
	h.ok(op("evaluate", "expression", "square == id*id", "frame_id", frame), "= true")
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{}), "Cleared")
	h.ok(op("continue"), "exited with code 0")
	h.ok(op("output"), "sum 14")
}

const cProgram = `#include <stdio.h>

static int add(int a, int b) {
    int s = a + b;
    return s;
}

int main(void) {
    int r = add(20, 22);
    printf("r=%d\n", r);
    return 3;
}
`

// C with lldb: built with gcc -g inside the sandbox; a breakpoint, the
// stack, a local and the exit code.
func TestCLLDB(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "cmake_minimum_required(VERSION 3.10)\nproject(add C)\nadd_executable(add add.c)\n")
	h.put("add.c", cProgram)
	h.sh("cd " + h.dir + " && gcc -g -O0 -o add add.c")
	h.ok(op("breakpoints", "file", "add.c", "lines", []int{h.line("add.c", "return s;")}))
	text := h.ok(op("launch", "program", "add"), "lldb", "Stopped: breakpoint", h.at("add.c", "return s;"), "add", "return s;")
	h.ok(op("stack"), "#0", h.at("add.c", "return s;"), "#1", "main", h.at("add.c", "int r = add(20, 22);"), "int r = add(20, 22);")
	scopes := h.ok(op("scopes", "frame_id", num(t, text, "[frame ")), "Locals")
	h.ok(op("variables", "reference", refOf(t, scopes, "Locals")), "s (int) = 42")
	h.ok(op("continue"), "exited with code 3")
	h.ok(op("output"), "r=42")
}

// attach in a Go project reaches a headless delve server (attach remote).
func TestAttachDelveHeadless(t *testing.T) {
	h := newHarness(t)
	h.put("go.mod", "module example.com/dbg\n\ngo 1.22\n")
	h.put("main.go", goProgram)
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{h.line("main.go", "out <- square")}))
	text := attachHeadlessDelve(t, h, h.dir, 5679)
	if !strings.Contains(text, h.at("main.go", "out <- square")) {
		text = h.ok(op("continue"))
	}
	if !strings.Contains(text, h.at("main.go", "out <- square")) || !strings.Contains(text, "main.worker") {
		t.Fatalf("no stop in the goroutine:\n%s", text)
	}
	h.ok(op("terminate"), "Terminated")
}

// delve's DAP connection is held by the agent's dap-bridge inside the
// sandbox, so a new sandboxd (a new supervisor) picks the stopped Go
// session up and drives it on, as it does debugpy's.
func TestDelveResumeAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.put("go.mod", "module example.com/dbg\n\ngo 1.22\n")
	h.put("main.go", goProgram)
	h.ok(op("breakpoints", "file", "main.go", "lines", []int{h.line("main.go", "out <- square")}))
	h.ok(op("launch", "program", "main.go"), "delve", "Stopped: breakpoint", h.at("main.go", "out <- square"))

	h2 := h.restarted()
	h2.ok(op("status"), "Session: delve", "Stopped: breakpoint (before sandboxd restarted)", h2.at("main.go", "out <- square"))
	h2.ok(op("stack"), "main.worker at "+h2.at("main.go", "out <- square"))
	h2.ok(op("breakpoints", "file", "main.go", "lines", []int{}), "Cleared")
	h2.ok(op("continue"), "exited with code 0")
	h2.ok(op("output"), "sum 14")
	h2.ok(op("terminate"), "Terminated")
}

// attachHeadlessDelve starts `dlv debug --headless` on port in dir (killed
// when the test ends) and attaches the debug tool to it once it listens:
// delve builds the program first. It returns the attach result.
func attachHeadlessDelve(t *testing.T, h *harness, dir string, port int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := sb.ag.Spawn(ctx, &proto.SpawnRequest{
		Argv: []string{"dlv", "debug", "--headless", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--accept-multiclient", "--api-version", "2"},
		Dir:  dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sb.ag.Signal(c, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
	})
	var text string
	for i := 0; i < 150; i++ { // at most 30 s of delve's build
		var isErr bool
		if text, isErr = h.call(op("attach", "port", port)); !isErr {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := fmt.Sprintf("Attached to 127.0.0.1:%d with delve", port); !strings.Contains(text, want) {
		t.Fatalf("attach:\n%s", text)
	}
	return text
}
