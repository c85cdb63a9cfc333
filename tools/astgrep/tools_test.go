package astgrep_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools/astgrep"
)

const goFile = `package app

import "fmt"

func open(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	return fmt.Errorf("open %s: %w",
		name, // which file
		errNotFound)
}

// fmt.Errorf("in a comment") never matches
var s = "fmt.Errorf(\"in a string\")"
`

func TestGrepFindsShapesAcrossTheWorkspace(t *testing.T) {
	s := newSandbox(t)
	s.write("app/open.go", goFile)
	s.write("app/other.go", "package app\n\nfunc other() error { return nil }\n")
	s.write("vendor/x.go", "package x\n\nvar _ = fmt.Errorf(\"ignored\", 1)\n")
	s.write(".gitignore", "vendor/\n")
	s.write("app/blob.go", "package app\x00\x00 fmt.Errorf(\"x\", 1)")
	out := s.ok("ast_grep", map[string]any{"pattern": "fmt.Errorf($MSG, $$$ARGS)", "language": "go"})
	for _, want := range []string{
		"1 match in 1 file",
		"app/open.go:9: fmt.Errorf(\"open %s: %w\",",
		"$MSG = \"open %s: %w\"",
		"$$$ARGS = name, // which file errNotFound",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "vendor/x.go") || strings.Contains(out, "blob") || !strings.Contains(out, "Not searched: vendor/ (.gitignore).") {
		t.Errorf("searched an ignored or binary file:\n%s", out)
	}
	// A file path infers the language; $$$ may be empty.
	out = s.ok("ast_grep", map[string]any{"pattern": "fmt.Errorf($MSG, $$$)", "path": "app/open.go"})
	if !strings.Contains(out, "app/open.go:9") {
		t.Errorf("file search:\n%s", out)
	}
	out = s.ok("ast_grep", map[string]any{"pattern": "fmt.Errorf($MSG)", "path": "app/open.go"})
	if !strings.Contains(out, "app/open.go:7: fmt.Errorf(\"empty name\")") {
		t.Errorf("single-argument search:\n%s", out)
	}
}

func TestGrepCapsResults(t *testing.T) {
	s := newSandbox(t)
	var b strings.Builder
	b.WriteString("def f():\n")
	for i := 0; i < 30; i++ {
		b.WriteString("    print(i)\n")
	}
	s.write("m.py", b.String())
	out := s.ok("ast_grep", map[string]any{"pattern": "print($X)", "path": "m.py", "max_results": 5})
	if !strings.Contains(out, "30 matches in 1 file") || !strings.Contains(out, "25 more matches not shown") {
		t.Errorf("cap:\n%s", out)
	}
	if n := strings.Count(out, "m.py:"); n != 5 {
		t.Errorf("%d results shown, want 5", n)
	}
}

func TestGrepErrorsSayWhatToDo(t *testing.T) {
	s := newSandbox(t)
	s.write("a.go", "package a\n")
	s.write("notes.txt", "hello\n")
	for _, c := range []struct {
		args  map[string]any
		wants []string
	}{
		{map[string]any{"pattern": "f($X)"}, []string{"directory", "give language", "go", "python", "bash"}},
		{map[string]any{"pattern": "f($X)", "language": "cobol"}, []string{"not a shipped grammar", "use one of", "go", "bash"}},
		{map[string]any{"pattern": "f($X)", "path": "notes.txt"}, []string{"cannot tell the language", "give language"}},
		{map[string]any{"pattern": "func (", "path": "a.go"}, []string{"unparseable as go", "line 1"}},
		{map[string]any{"pattern": "f($X)", "path": "../x.go"}, []string{"outside the workspace"}},
		{map[string]any{"pattern": "f($X)", "path": "missing.go"}, []string{"does not exist"}},
	} {
		out := s.fail("ast_grep", c.args)
		for _, w := range c.wants {
			if !strings.Contains(out, w) {
				t.Errorf("%v: %q lacks %q", c.args, out, w)
			}
		}
	}
}

func TestRepeatedSearchReadsAndParsesNothing(t *testing.T) {
	s := newSandbox(t)
	for i := 0; i < 20; i++ {
		s.write(filepath.Join("pkg", string(rune('a'+i))+".go"), "package pkg\n\nfunc f() { g(1) }\n")
	}
	args := map[string]any{"pattern": "g($X)", "language": "go"}
	first := s.ok("ast_grep", args)
	parsed, read := s.eng.Stats()
	if parsed != 20 || read != 20 {
		t.Fatalf("first search parsed %d, read %d; want 20 each", parsed, read)
	}
	if again := s.ok("ast_grep", args); again != first {
		t.Errorf("second answer differs:\n%s\n---\n%s", again, first)
	}
	if p2, r2 := s.eng.Stats(); p2 != parsed || r2 != read {
		t.Errorf("repeated search parsed %d and read %d more files", p2-parsed, r2-read)
	}
}

func TestEditAcceptWritesAllFiles(t *testing.T) {
	s := newSandbox(t)
	s.write("a.go", "package a\n\nfunc f() {\n\tlog.Printf(\"a %d\", 1)\n}\n")
	s.write("b/b.go", "package b\n\nfunc g() {\n\tif ok {\n\t\tlog.Printf(\"b\")\n\t}\n}\n")
	out := s.ok("ast_edit", map[string]any{"pattern": "log.Printf($$$ARGS)", "rewrite": "slog.Info(fmt.Sprintf($$$ARGS))", "language": "go"})
	for _, want := range []string{"Prepared 2 replacements in 2 files", "nothing is written yet", "--- a/a.go", "+++ b/a.go", "-\tlog.Printf(\"a %d\", 1)", "+\tslog.Info(fmt.Sprintf(\"a %d\", 1))", "+\t\tslog.Info(fmt.Sprintf(\"b\"))"} {
		if !strings.Contains(out, want) {
			t.Errorf("ast_edit output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(s.read("a.go"), "slog") {
		t.Fatal("ast_edit wrote a file")
	}
	id := editID(t, out)
	res := s.ok("resolve", map[string]any{"edit_id": id, "action": "accept"})
	if !strings.Contains(res, "2 replacements in 2 files") || !strings.Contains(res, "diagnostics: none new") {
		t.Errorf("resolve: %s", res)
	}
	if got := s.read("b/b.go"); got != "package b\n\nfunc g() {\n\tif ok {\n\t\tslog.Info(fmt.Sprintf(\"b\"))\n\t}\n}\n" {
		t.Errorf("b/b.go = %q", got)
	}
	if len(s.written) != 1 || len(s.written[0]) != 2 {
		t.Errorf("AfterWrite saw %v, want both files once", s.written)
	}
	// An id works once.
	if out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("second accept: %s", out)
	}
}

func TestEditRewriteReindents(t *testing.T) {
	s := newSandbox(t)
	s.write("m.py", "class A:\n    def f(self):\n        if self.x:\n            go(1)\n            go(2)\n")
	out := s.ok("ast_edit", map[string]any{"pattern": "if $C:\n    $$$BODY", "rewrite": "while $C:\n    $$$BODY\n    break", "path": "m.py"})
	s.ok("resolve", map[string]any{"edit_id": editID(t, out), "action": "accept"})
	want := "class A:\n    def f(self):\n        while self.x:\n            go(1)\n            go(2)\n            break\n"
	if got := s.read("m.py"); got != want {
		t.Errorf("m.py:\n%s\nwant:\n%s", got, want)
	}
}

func TestResolveRejectsWhenOneOfThreeFilesChanged(t *testing.T) {
	s := newSandbox(t)
	for _, n := range []string{"a.go", "b.go", "c.go"} {
		s.write(n, "package p\n\nvar _ = old(1)\n")
	}
	id := editID(t, s.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "language": "go"}))
	s.write("b.go", "package p\n\nvar _ = old(1) // touched\n")
	out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"})
	if !strings.Contains(out, "b.go") || strings.Contains(out, "a.go") || !strings.Contains(out, "nothing was written") {
		t.Errorf("reject: %s", out)
	}
	for _, n := range []string{"a.go", "c.go"} {
		if strings.Contains(s.read(n), "new(") {
			t.Errorf("%s was written although b.go changed", n)
		}
	}
}

// A failure in the middle of the write (the second file cannot be replaced)
// must leave every file as it was.
func TestCrashMidApplyLeavesOldTree(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed; it makes one file impossible to replace mid-apply")
	}
	s := newSandbox(t)
	for _, n := range []string{"a.go", "b.go", "c.go"} {
		s.write(n, "package p\n\nvar _ = old(1)\n")
	}
	id := editID(t, s.ok("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "language": "go"}))
	b := filepath.Join(s.ws, "b.go")
	if out, err := exec.Command("chattr", "+i", b).CombinedOutput(); err != nil {
		t.Skipf("this file system cannot make a file immutable (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", b).Run() })
	out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"})
	if !strings.Contains(out, "nothing was written") {
		t.Errorf("failed apply: %s", out)
	}
	for _, n := range []string{"a.go", "b.go", "c.go"} {
		if got := s.read(n); got != "package p\n\nvar _ = old(1)\n" {
			t.Errorf("%s = %q after a failed apply, want the old content", n, got)
		}
	}
	entries, _ := os.ReadDir(s.ws)
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("workspace holds %v, want the three files and no leftovers", names)
	}
}

func TestEditIDExpiresDiscardsAndBelongsToItsRun(t *testing.T) {
	s := newSandbox(t, astgrep.WithEditLimits(time.Minute, 2, 1<<20))
	s.write("a.go", "package p\n\nvar _ = old(1)\n")
	args := map[string]any{"pattern": "old($X)", "rewrite": "new($X)", "path": "a.go"}
	id := editID(t, s.ok("ast_edit", args))
	s.clock.Advance(2 * time.Minute)
	if out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "expired") {
		t.Errorf("expired: %s", out)
	}
	id = editID(t, s.ok("ast_edit", args))
	if out := s.ok("resolve", map[string]any{"edit_id": id, "action": "discard"}); !strings.Contains(out, "nothing was written") {
		t.Errorf("discard: %s", out)
	}
	if s.read("a.go") != "package p\n\nvar _ = old(1)\n" {
		t.Error("discard wrote the file")
	}
	if out := s.fail("resolve", map[string]any{"edit_id": "edit-nope", "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("unknown: %s", out)
	}
	// Another run cannot resolve it, and the end of the run drops it.
	id = editID(t, s.ok("ast_edit", args))
	s.env.Run.ID = "r2"
	if out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("other run: %s", out)
	}
	s.env.Run.ID = "r1"
	s.dropRun("r1")
	if out := s.fail("resolve", map[string]any{"edit_id": id, "action": "accept"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("after run end: %s", out)
	}
	// At most two per run: the oldest goes first.
	ids := []string{editID(t, s.ok("ast_edit", args)), editID(t, s.ok("ast_edit", args)), editID(t, s.ok("ast_edit", args))}
	if out := s.fail("resolve", map[string]any{"edit_id": ids[0], "action": "discard"}); !strings.Contains(out, "not a prepared edit") {
		t.Errorf("oldest beyond the bound: %s", out)
	}
	s.ok("resolve", map[string]any{"edit_id": ids[2], "action": "accept"})
}

func TestEditRejectsUnknownRewriteVariable(t *testing.T) {
	s := newSandbox(t)
	s.write("a.go", "package p\n\nvar _ = old(1)\n")
	out := s.fail("ast_edit", map[string]any{"pattern": "old($X)", "rewrite": "new($Y)", "path": "a.go"})
	if !strings.Contains(out, "$Y") || !strings.Contains(out, "$X") {
		t.Errorf("unknown variable: %s", out)
	}
}

// The walk enters node_modules unless a .gitignore excludes it, and the
// result names every directory it did not enter and why.
func TestGrepEntersNodeModulesAndNamesSkippedDirectories(t *testing.T) {
	s := newSandbox(t)
	s.write("app.js", "const o = { port: 1 };\n")
	s.write("node_modules/pad/index.js", "module.exports = { pad: 2 };\n")
	s.write("web/.gitignore", "node_modules/\n")
	s.write("web/node_modules/x/index.js", "const o = { hidden: 3 };\n")
	s.write(".git/config.js", "const o = { git: 4 };\n")
	out := s.ok("ast_grep", map[string]any{"pattern": "$K: $V", "language": "javascript"})
	for _, want := range []string{"2 matches in 2 files", "app.js:1: port: 1", "node_modules/pad/index.js:1: pad: 2",
		"Not searched: web/node_modules/ (.gitignore)."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") || strings.Contains(out, "git: 4") {
		t.Errorf("searched an ignored directory:\n%s", out)
	}
	out = s.ok("ast_grep", map[string]any{"pattern": "nothing($X)", "language": "javascript"})
	if !strings.Contains(out, "No matches") || !strings.Contains(out, "web/node_modules/ (.gitignore)") {
		t.Errorf("no-match result does not name the skipped directories:\n%s", out)
	}
}
