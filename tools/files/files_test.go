package files_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

func TestWriteReadEdit(t *testing.T) {
	s := newSandbox(t)
	out := s.ok("write", map[string]any{"path": "a/b/c.go", "content": "package c\n\nfunc F() int {\n\treturn 1\n}\n"})
	abs := filepath.Join(s.ws, "a/b/c.go")
	if !strings.HasPrefix(out, fmt.Sprintf("wrote 38 bytes (5 lines) to %s", abs)) || !strings.Contains(out, "diagnostics: none new") {
		t.Fatalf("write: %q", out)
	}
	if len(s.written) != 1 || s.written[0][0] != abs {
		t.Fatalf("AfterWrite got %v", s.written)
	}
	got := s.ok("read", map[string]any{"path": "a/b/c.go", "offset": 3, "limit": 2})
	if got != "     3\tfunc F() int {\n     4\t\treturn 1\n(1 more lines; continue with offset=5.)\n" {
		t.Fatalf("read: %q", got)
	}
	// Relative to the run's workdir, and absolute inside the workspace.
	s.env.Run.Workdir = filepath.Join(s.ws, "a")
	s.ok("read", map[string]any{"path": "b/c.go"})
	s.ok("read", map[string]any{"path": abs})
	s.env.Run.Workdir = ""

	out = s.ok("edit", map[string]any{"path": "a/b/c.go", "old": "return 1", "new": "return 2"})
	if !strings.HasPrefix(out, "edited "+abs+": replaced 1 occurrence at line 4") {
		t.Fatalf("edit: %q", out)
	}
	if !strings.Contains(s.get("a/b/c.go"), "return 2") {
		t.Fatal("edit not written")
	}
	s.bad("edit", map[string]any{"path": "a/b/c.go", "old": "return 9", "new": "x"}, "old was not found in the file; read the file again")
	s.put("dup.txt", "x\ny\nx\n")
	s.bad("edit", map[string]any{"path": "dup.txt", "old": "x", "new": "z"}, "old occurs 2 times (at lines 1, 3)")
	s.bad("edit", map[string]any{"path": "dup.txt", "old": "x", "new": "x"}, "old and new are identical")
	s.ok("edit", map[string]any{"path": "dup.txt", "old": "x", "new": "z", "replace_all": true})
	if s.get("dup.txt") != "z\ny\nz\n" {
		t.Fatalf("replace_all wrote %q", s.get("dup.txt"))
	}
	s.bad("edit", map[string]any{"path": "missing.txt", "old": "x", "new": "y"}, "does not exist")
	s.bad("read", map[string]any{"path": "missing.txt"}, "does not exist")
	s.bad("read", map[string]any{"path": "a"}, "is a directory, not a file; list it with shell")
	s.bad("read", map[string]any{"path": "a/b/c.go", "limit": "ten"}, `argument "limit" must be an integer, got the string "ten"`)

	s.put("empty.txt", "")
	if got := s.ok("read", map[string]any{"path": "empty.txt"}); !strings.Contains(got, "is empty") {
		t.Fatalf("empty: %q", got)
	}
	if err := os.WriteFile(filepath.Join(s.ws, "bin.dat"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	s.bad("read", map[string]any{"path": "bin.dat"}, "is a binary file")
	s.bad("edit", map[string]any{"path": "bin.dat", "old": "ELF", "new": "x"}, "is a binary file")
}

func TestReadCaps(t *testing.T) {
	s := newSandbox(t, files.WithReadLimit(100))
	var b strings.Builder
	for i := 1; i <= 250; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString(strings.Repeat("x", 2500) + "\n")
	s.put("big.txt", b.String())
	got := s.ok("read", map[string]any{"path": "big.txt"})
	if !strings.HasSuffix(got, "   100\tline 100\n(151 more lines; continue with offset=101.)\n") {
		t.Fatalf("tail of read: %q", got[len(got)-80:])
	}
	got = s.ok("read", map[string]any{"path": "big.txt", "offset": 251})
	if !strings.Contains(got, "[line cut: 500 more characters]") {
		t.Fatalf("long line: %q", got[len(got)-80:])
	}
}

func TestApplyPatch(t *testing.T) {
	s := newSandbox(t)
	s.put("src/a.txt", "one\ntwo\nthree\n")
	s.put("src/b.txt", "alpha\nbeta\n")
	s.put("gone.txt", "bye\n")
	patch := `diff --git a/src/a.txt b/src/a.txt
--- a/src/a.txt
+++ b/src/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/new/dir/c.txt b/new/dir/c.txt
new file mode 100644
--- /dev/null
+++ b/new/dir/c.txt
@@ -0,0 +1,2 @@
+fresh
+file
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`
	out := s.ok("apply_patch", map[string]any{"patch": patch})
	for _, want := range []string{"applied the patch to 3 files", "M " + filepath.Join(s.ws, "src/a.txt") + " (+1 -1)", "A " + filepath.Join(s.ws, "new/dir/c.txt") + " (+2)", "D " + filepath.Join(s.ws, "gone.txt") + " (-1)", "diagnostics: none new"} {
		if !strings.Contains(out, want) {
			t.Fatalf("summary %q lacks %q", out, want)
		}
	}
	if s.get("src/a.txt") != "one\nTWO\nthree\n" || s.get("new/dir/c.txt") != "fresh\nfile\n" {
		t.Fatal("patch content wrong")
	}
	if _, err := os.Stat(filepath.Join(s.ws, "gone.txt")); !os.IsNotExist(err) {
		t.Fatalf("gone.txt still there: %v", err)
	}
	if got := s.written[len(s.written)-1]; len(got) != 3 {
		t.Fatalf("AfterWrite got %v", got)
	}

	// A rename with a change, and two sections for one file.
	s.put("r/old.txt", "keep\nchange\n")
	s.ok("apply_patch", map[string]any{"patch": `diff --git a/r/old.txt b/r/new.txt
similarity index 50%
rename from r/old.txt
rename to r/new.txt
--- a/r/old.txt
+++ b/r/new.txt
@@ -1,2 +1,2 @@
 keep
-change
+changed
--- a/src/b.txt
+++ b/src/b.txt
@@ -1 +1 @@
-alpha
+ALPHA
--- a/src/b.txt
+++ b/src/b.txt
@@ -2 +2 @@
-beta
+BETA
`})
	if s.get("r/new.txt") != "keep\nchanged\n" || s.get("src/b.txt") != "ALPHA\nBETA\n" {
		t.Fatalf("rename/sections: new=%q b=%q", s.get("r/new.txt"), s.get("src/b.txt"))
	}
	if _, err := os.Stat(filepath.Join(s.ws, "r/old.txt")); !os.IsNotExist(err) {
		t.Fatalf("renamed file still there: %v", err)
	}
}

// TestApplyPatchAllOrNothing: the first file's hunk is fine, the second's is
// not; neither file (nor the new one) may change.
func TestApplyPatchAllOrNothing(t *testing.T) {
	s := newSandbox(t)
	s.put("a.txt", "one\ntwo\n")
	s.put("b.txt", "alpha\nbeta\n")
	patch := `--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 one
-two
+TWO
--- /dev/null
+++ b/c.txt
@@ -0,0 +1 @@
+new
--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,2 @@
 alpha
-gamma
+delta
`
	s.bad("apply_patch", map[string]any{"patch": patch}, `hunk 1 of `+filepath.Join(s.ws, "b.txt")+` (@@ -1,2 +1,2 @@) does not apply: at line 2 the file has "beta" where the hunk expects "gamma"`)
	if s.get("a.txt") != "one\ntwo\n" || s.get("b.txt") != "alpha\nbeta\n" {
		t.Fatal("a failed patch changed files")
	}
	if _, err := os.Stat(filepath.Join(s.ws, "c.txt")); !os.IsNotExist(err) {
		t.Fatal("a failed patch created c.txt")
	}
	// Creating a file that exists is refused the same way.
	s.bad("apply_patch", map[string]any{"patch": "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+x\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n"}, "already exists")
	if s.get("a.txt") != "one\ntwo\n" {
		t.Fatal("refused patch changed a.txt")
	}
	s.bad("apply_patch", map[string]any{"patch": "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n"}, "which does not exist")
	s.bad("apply_patch", map[string]any{"patch": "not a diff"}, "the patch cannot be parsed: the patch has no file headers")
	if len(s.written) != 0 {
		t.Fatalf("AfterWrite called for failed patches: %v", s.written)
	}
}

func TestShell(t *testing.T) {
	s := newSandbox(t, files.WithShellOutputBytes(64))
	s.put("sub/f.txt", "x")
	out := s.ok("shell", map[string]any{"command": "echo out; echo err >&2; exit 3"})
	if out != "exit status 3\n--- stdout ---\nout\n--- stderr ---\nerr" {
		t.Fatalf("shell: %q", out)
	}
	out = s.ok("shell", map[string]any{"command": "pwd; ls", "workdir": "sub"})
	if !strings.Contains(out, filepath.Join(s.ws, "sub")+"\nf.txt") {
		t.Fatalf("workdir: %q", out)
	}
	s.env.Run.Workdir = filepath.Join(s.ws, "sub")
	out = s.ok("shell", map[string]any{"command": "ls"})
	if !strings.Contains(out, "f.txt") {
		t.Fatalf("run workdir: %q", out)
	}
	s.env.Run.Workdir = ""
	out = s.ok("shell", map[string]any{"command": "seq 1 1000"})
	if !strings.Contains(out, "1\n2\n3\n") || !strings.Contains(out, "bytes omitted ...]") || !strings.HasSuffix(strings.Split(out, "--- stderr")[0], "999\n1000\n") {
		t.Fatalf("capped output: %q", out)
	}
	s.bad("shell", map[string]any{"command": "sleep 30", "timeout_s": 1}, "timed out after 1s")
	s.bad("shell", map[string]any{"command": "true", "timeout_s": 601}, `argument "timeout_s" must be at most 600, got 601`)
	s.bad("shell", map[string]any{"command": "true", "workdir": "sub/f.txt"}, "is not a directory")
	s.bad("shell", map[string]any{"command": "true", "workdir": "nope"}, "does not exist")
}

// TestConcurrentChangeIsDetected changes the file between the tool's read
// and its write: edit and apply_patch must refuse and keep the other change.
func TestConcurrentChangeIsDetected(t *testing.T) {
	var s *sandbox
	s = newSandbox(t, files.WithBeforeWriteForTest(func() { s.put("f.txt", "changed elsewhere\n") }))
	s.put("f.txt", "original\n")
	s.bad("edit", map[string]any{"path": "f.txt", "old": "original", "new": "mine"}, "changed since it was read")
	if s.get("f.txt") != "changed elsewhere\n" {
		t.Fatalf("edit overwrote a concurrent change: %q", s.get("f.txt"))
	}
	s.put("f.txt", "original\n")
	s.put("g.txt", "g\n")
	text := s.bad("apply_patch", map[string]any{"patch": "--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-g\n+G\n--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-original\n+mine\n"}, "changed since it was read")
	if !strings.Contains(text, "nothing was written") || s.get("g.txt") != "g\n" || s.get("f.txt") != "changed elsewhere\n" {
		t.Fatalf("apply_patch after a concurrent change: %q, g=%q f=%q", text, s.get("g.txt"), s.get("f.txt"))
	}
}

func TestNoSandbox(t *testing.T) {
	s := newSandbox(t)
	s.env.HasSandbox = false
	if specs := s.reg.Visible(s.env); len(specs) != 0 {
		t.Fatalf("file tools visible without a sandbox: %v", specs)
	}
	_, err := s.reg.Call(t.Context(), s.env, "read", []byte(`{"path":"x"}`))
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("call without a sandbox: %v", err)
	}
	// A sandbox that vanished after the run listed its tools.
	s.env.HasSandbox = true
	s.env.Sandbox = func(context.Context) (*tools.SandboxConn, error) {
		return nil, errdefs.NotFound("the sandbox of conversation c1 no longer exists; create a new one")
	}
	s.bad("shell", map[string]any{"command": "true"}, "no longer exists")
	// Read-only surfaces see read only.
	s.env.Run.Surface = tools.SurfacePlan
	var names []string
	for _, sp := range s.reg.Visible(s.env) {
		names = append(names, sp.Name)
	}
	if strings.Join(names, ",") != "read" {
		t.Fatalf("plan surface sees %v", names)
	}
}

func TestShellPrefersBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash on this machine")
	}
	s := newSandbox(t)
	out := s.ok("shell", map[string]any{"command": `[[ -n "$BASH_VERSION" ]] && echo bash; arr=(a b); echo "${arr[1]}"`})
	if !strings.Contains(out, "bash\nb") {
		t.Fatalf("bash-isms failed: %q", out)
	}
}
