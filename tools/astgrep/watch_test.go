package astgrep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// A command in the sandbox rewrites a file keeping its size and its
// modification time: the size-and-time check cannot see it, the
// workspace watch does, and the next search finds the new text.
func TestAstGrepSeesAChangeThatKeepsSizeAndTime(t *testing.T) {
	s := newSandbox(t)
	s.write("app/a.go", "package app\n\nvar _ = f(Old)\n")
	out := s.ok("ast_grep", map[string]any{"pattern": "f($X)", "language": "go"})
	if !strings.Contains(out, "f(Old)") {
		t.Fatalf("first search:\n%s", out)
	}
	conn, err := s.env.Sandbox(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The search subscribed the cache; wait until the watch is up.
	sub := conn.Agent.Subscribe(conn.Workspace, "astgrep", func(proto.WatchEvent) {})
	deadline := time.Now().Add(10 * time.Second)
	for !sub.Status().Active {
		if time.Now().After(deadline) {
			t.Fatalf("the workspace watch did not come up: %+v", sub.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := filepath.Join(s.ws, "app/a.go")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("package app\n\nvar _ = f(New)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Now(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	out = s.ok("ast_grep", map[string]any{"pattern": "f($X)", "language": "go"})
	if !strings.Contains(out, "f(New)") || strings.Contains(out, "f(Old)") {
		t.Fatalf("after the file was rewritten the search answered from the cache:\n%s", out)
	}
}
