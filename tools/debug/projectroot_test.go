package debug_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

const apiMain = `package main

import (
	"fmt"

	"example.com/api/store"
)

func main() {
	s := store.New()
	s.Put("k", 41)
	fmt.Println("value", s.Get("k")+1)
}
`

const apiStore = `package store

type Store struct{ m map[string]int }

func New() *Store { return &Store{m: map[string]int{}} }

func (s *Store) Put(k string, v int) {
	s.m[k] = v // put
}

func (s *Store) Get(k string) int { return s.m[k] }
`

// A Go module two levels below the working directory (no go.mod above
// it) builds and runs from its own root, its package beside main.go
// included.
func TestDelveModuleInSubdirectory(t *testing.T) {
	h := newHarness(t)
	h.putDeep("services/api/go.mod", "module example.com/api\n\ngo 1.22\n")
	h.putDeep("services/api/main.go", apiMain)
	h.putDeep("services/api/store/store.go", apiStore)
	line := fileLineOf(t, h, "services/api/store/store.go", "// put")
	h.ok(op("breakpoints", "file", "services/api/store/store.go", "lines", []int{line}))
	h.ok(op("launch", "program", "services/api/main.go"), "delve", "Stopped: breakpoint", "services/api/store/store.go:", "Put")
	h.ok(op("stack"), "main.main at services/api/main.go:")
	h.ok(op("breakpoints", "file", "services/api/store/store.go", "lines", []int{}), "Cleared")
	h.ok(op("continue"), "exited with code 0")
	h.ok(op("output"), "value 42")
}

// A Python project in a subfolder: its script imports the project's own
// package from the project root.
func TestPythonProjectInSubfolder(t *testing.T) {
	h := newHarness(t)
	h.putDeep("tools/report/pyproject.toml", "[project]\nname = \"report\"\n")
	h.putDeep("tools/report/reportlib/__init__.py", "")
	h.putDeep("tools/report/reportlib/calc.py", "def total(xs):\n    s = sum(xs)  # total\n    return s\n")
	h.putDeep("tools/report/scripts/run.py", "from reportlib.calc import total\n\nprint('total', total([1, 2, 3]))\n")
	line := fileLineOf(t, h, "tools/report/reportlib/calc.py", "# total")
	h.ok(op("breakpoints", "file", "tools/report/reportlib/calc.py", "lines", []int{line}))
	h.ok(op("launch", "program", "tools/report/scripts/run.py"), "debugpy", "Stopped: breakpoint", "reportlib/calc.py:", "total")
	h.ok(op("continue"), "exited with code 0")
	h.ok(op("output"), "total 6")
}

// attach finds the project of the program that listens: a headless delve
// started in a module below the working directory is attached with delve.
func TestAttachDelveModuleInSubdirectory(t *testing.T) {
	h := newHarness(t)
	h.putDeep("services/api/go.mod", "module example.com/api\n\ngo 1.22\n")
	h.putDeep("services/api/main.go", apiMain)
	h.putDeep("services/api/store/store.go", apiStore)
	line := fileLineOf(t, h, "services/api/store/store.go", "// put")
	h.ok(op("breakpoints", "file", "services/api/store/store.go", "lines", []int{line}))
	text := attachHeadlessDelve(t, h, h.dir+"/services/api", 5681)
	if !strings.Contains(text, "store.go:") {
		text = h.ok(op("continue"))
	}
	if !strings.Contains(text, "store.go:") || !strings.Contains(text, "Put") {
		t.Fatalf("no stop in the module's package:\n%s", text)
	}
	h.ok(op("terminate"), "Terminated")
}

// putDeep writes a file under the working directory, creating its parent
// directories.
func (h *harness) putDeep(rel, content string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := sb.ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: h.dir, Files: []proto.WriteFile{{Path: rel, Data: []byte(content), MkdirAll: true}}})
	if err != nil {
		h.t.Fatalf("writing %s: %v", rel, err)
	}
}
