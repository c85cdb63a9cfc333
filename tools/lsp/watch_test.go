package lsp_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools/lsp"
)

// shellEditFreshness is the story of a dependency changed outside the
// write tools (here sed through the agent's exec, as a shell command or a
// code generator would): the consumer's diagnostics must then show the
// new error or say they are pending, never the "no problems" of before.
//
// Last, an edit of the dependency that changes nothing the consumer sees
// (a comment): the result comes back a fresh "no problems", not "pending"
// for good (typescript-language-server publishes nothing when a clean
// file stays clean; gopls and pyright publish for each new version).
func shellEditFreshness(t *testing.T, bx *box, consumer, dep, breakIt, fixIt, wantErr, comment string) {
	t.Helper()
	diag := map[string]any{"action": "diagnostics", "file": consumer}
	bx.ok("lsp", diag, "no problems")
	run := func(argv ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := bx.conn.Agent.Exec(ctx, &proto.ExecRequest{Argv: argv, Dir: bx.ws, Timeout: 20 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %s", argv, err, res.Stderr)
		}
	}
	sed := func(script string) { t.Helper(); run("sed", "-i", script, dep) }
	sed(breakIt)
	// Asked at once, then until the server has caught up.
	var out string
	for i := 0; i < 6; i++ {
		out = bx.ok("lsp", diag)
		if strings.Contains(out, "no problems") {
			t.Fatalf("after a shell edit broke %s, diagnostics of %s answered from the report before it:\n%s", dep, consumer, out)
		}
		if strings.Contains(out, wantErr) {
			break
		}
		if !strings.Contains(out, "pending") {
			t.Fatalf("after a shell edit broke %s, diagnostics of %s are neither the new error (%q) nor pending:\n%s", dep, consumer, wantErr, out)
		}
	}
	if !strings.Contains(out, wantErr) {
		t.Fatalf("the new error (%q) never showed in %s:\n%s", wantErr, consumer, out)
	}
	// And back: the error of before the fix is not shown as current.
	sed(fixIt)
	for i := 0; i < 6; i++ {
		out = bx.ok("lsp", diag)
		if strings.Contains(out, wantErr) {
			t.Fatalf("after a shell edit fixed %s, diagnostics of %s still showed the error from before it:\n%s", dep, consumer, out)
		}
		if strings.Contains(out, "no problems") {
			break
		}
	}
	if !strings.Contains(out, "no problems") {
		t.Fatalf("after the fix, %s never came back clean:\n%s", consumer, out)
	}
	run("sh", "-c", "echo '"+comment+"' >> "+dep)
	for i := 0; i < 3; i++ {
		if out = bx.ok("lsp", diag); strings.Contains(out, "no problems") {
			break
		}
	}
	if !strings.Contains(out, "no problems") {
		t.Fatalf("after a shell edit that changed nothing for %s, its diagnostics never came back clean:\n%s", consumer, out)
	}
	bx.ok("lsp", map[string]any{"action": "status"}, "file watching: ")
}

func TestGoShellEditFreshness(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	shellEditFreshness(t, bx, "goproj/main.go", "goproj/shapes/shape.go",
		"s/func NewSquare(größe float64) Square/func NewSquare(größe float64, extra int) Square/",
		"s/func NewSquare(größe float64, extra int) Square/func NewSquare(größe float64) Square/",
		"not enough arguments", "// benign")
}

func TestPythonShellEditFreshness(t *testing.T) {
	bx := newBox(t, []string{"python.txtar"})
	shellEditFreshness(t, bx, "pyproj/main.py", "pyproj/shapes/base.py",
		"s/def new_square(größe: float) -> Square:/def new_square(größe: float, extra: int) -> Square:/",
		"s/def new_square(größe: float, extra: int) -> Square:/def new_square(größe: float) -> Square:/",
		`"extra"`, "# benign")
}

func TestTypeScriptShellEditFreshness(t *testing.T) {
	bx := newBox(t, []string{"typescript.txtar"})
	shellEditFreshness(t, bx, "tsproj/src/main.ts", "tsproj/src/shape.ts",
		"s/export function newSquare(größe: number): Square {/export function newSquare(größe: number, extra: number): Square {/",
		"s/export function newSquare(größe: number, extra: number): Square {/export function newSquare(größe: number): Square {/",
		"Expected 2 arguments", "// benign")
}

// TestGoShellEditStaleWithoutWatch shows what the watch is for: without
// it the consumer's diagnostics report "no problems" after the shell edit.
func TestGoShellEditStaleWithoutWatch(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"}, lsp.WithWatch(false))
	diag := map[string]any{"action": "diagnostics", "file": "goproj/main.go"}
	bx.ok("lsp", diag, "no problems")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bx.conn.Agent.Exec(ctx, &proto.ExecRequest{Argv: []string{"sed", "-i", "s/func NewSquare(größe float64) Square/func NewSquare(größe float64, extra int) Square/", "goproj/shapes/shape.go"}, Dir: bx.ws}); err != nil {
		t.Fatal(err)
	}
	bx.ok("lsp", diag, "no problems")
	bx.ok("lsp", map[string]any{"action": "status"}, "file watching: off")
}

// A command rewrites a dependency the server caches (it reads it once and
// then only when told): the server learns of it only through
// didChangeWatchedFiles for its registered glob, and republishes only for
// a new version of the open document. The result is the new error, never
// the "no problems" of before; without the watch it is that stale result.
func TestFakeShellEditReachesTheServer(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watch", false: "no-watch"}[watch], func(t *testing.T) {
			bx := newLocalBox(t, "deps", lsp.WithWatch(watch))
			write(t, bx.ws+"/proj/lib.dep", "fine\n")
			write(t, bx.ws+"/proj/a.fk", "use lib\n")
			diag := map[string]any{"action": "diagnostics", "file": "proj/a.fk"}
			bx.ok("lsp", diag, "no problems")
			if watch {
				waitWatch(t, bx)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := bx.conn.Agent.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", "echo BROKEN > proj/lib.dep"}, Dir: bx.ws}); err != nil {
				t.Fatal(err)
			}
			if !watch {
				bx.ok("lsp", diag, "no problems")
				return
			}
			bx.ok("lsp", diag, "1 problem(s)", "dependency broken")
			bx.ok("lsp", map[string]any{"action": "status"}, "file watching: 2 directories")
		})
	}
}

// waitWatch waits until the lsp's watch subscription is established.
func waitWatch(t *testing.T, bx *box) {
	t.Helper()
	sub := bx.conn.Agent.Subscribe(bx.conn.Workspace, "lsp", nil)
	deadline := time.Now().Add(10 * time.Second)
	for !sub.Status().Active {
		if time.Now().After(deadline) {
			t.Fatalf("the workspace watch did not come up: %+v", sub.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A burst over the watch's cap ("many files changed") that also deletes
// the dependency: the consumer must not stay clean.
func TestGoOverflowWithDeletion(t *testing.T) {
	bx := newBox(t, []string{"go.txtar"})
	diag := map[string]any{"action": "diagnostics", "file": "goproj/main.go"}
	// The first report may take a while on a loaded machine: "pending"
	// says to ask again.
	for i := 0; !strings.Contains(bx.ok("lsp", diag), "no problems"); i++ {
		if i == 5 {
			t.Fatal("the consumer never answered clean before the burst")
		}
	}
	waitWatch(t, bx)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One process makes the 2,500 files, so the burst has no quiet window
	// in it even when the machine is busy.
	script := `mkdir -p gen && seq 2500 | sed 's|^|gen/f|; s|$|.txt|' | xargs touch && rm goproj/shapes/shape.go`
	if res, err := bx.conn.Agent.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", script}, Dir: bx.ws, Timeout: 50 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %v", err, res)
	}
	var out string
	for i := 0; i < 6; i++ {
		out = bx.ok("lsp", diag)
		if strings.Contains(out, "no problems") {
			t.Fatalf("after a burst that deleted the dependency, the consumer answered clean:\n%s", out)
		}
		if strings.Contains(out, "problem(s)") {
			break
		}
	}
	if !strings.Contains(out, "problem(s)") {
		t.Fatalf("the deleted dependency never showed in the consumer:\n%s", out)
	}
	bx.ok("lsp", map[string]any{"action": "status"}, "1 full resyncs")
}

// A dependency changed outside the tools while its server was still
// starting, after the server had read it (its workspace load): once the
// server runs it is told of the change, so the consumer's diagnostics
// are the new error, never the report from the file as it was read.
func TestFakeChangeDuringStartReachesTheServer(t *testing.T) {
	bx := newLocalBox(t, "loaddeps")
	write(t, bx.ws+"/proj/lib.dep", "fine\n")
	write(t, bx.ws+"/proj/a.fk", "use lib\n")
	// status makes the supervisor (and its subscription) without starting
	// a server; the watch is then up before the server starts.
	bx.ok("lsp", map[string]any{"action": "status"}, "file watching")
	waitWatch(t, bx)
	diag := map[string]any{"action": "diagnostics", "file": "proj/a.fk"}
	first := make(chan string, 1)
	go func() { first <- bx.ok("lsp", diag) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(bx.ws + "/proj/.loaded"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not load its workspace within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	write(t, bx.ws+"/proj/lib.dep", "BROKEN\n")
	// The change's batch (a 75 ms window) reaches sandboxd while the
	// server still loads; then the load ends.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = bx.conn.Agent.Subscribe(bx.conn.Workspace, "lsp", nil).Sync(ctx)
	write(t, bx.ws+"/proj/.go", "")
	if out := <-first; strings.Contains(out, "no problems") {
		t.Fatalf("the first diagnostics answered from the dependency as the server read it before the change:\n%s", out)
	}
	bx.ok("lsp", diag, "1 problem(s)", "dependency broken")
}
