package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// CommitHookEnv is the variable an agent built with -tags commithook reads
// (agent/daemon/commithook_on.go): a directory through which the test
// stops the agent at one step of a commit.
const CommitHookEnv = "SANDBOXD_AGENT_COMMIT_HOOK"

// CommitPoints are the steps of a commit of the crash batch (four
// entries) in order; the first two precede the commit line.
var CommitPoints = []string{"planned", "staged", "committed", "applied:0", "applied:1", "applied:2", "applied:3", "synced", "cleaned", "done"}

// committedAt reports whether a crash at point must leave the new tree
// (the journal had its commit line) rather than the old one.
func committedAt(point string) bool { return point != "planned" && point != "staged" }

// Kill ends the sandbox's agent at once, the way an OOM kill or a stop
// would (pid is the agent daemon's, as its hello tells; point is where its
// commit stands); it returns once the sandbox can be reached again, by the
// same agent binary restarted.
type Kill func(ctx context.Context, info sandbox.Info, pid int, point string) error

// CommitCrash stops a real agent (built with -tags commithook) at each
// step of a write_files commit, kills it with kill, and checks after the
// restarted agent's recovery that the workspace holds the old tree or the
// new one, the one the journal promised, with no hidden file left. hookDir
// is a directory the agent can write, outside the workspace. Each point
// is bounded by a deadline.
func CommitCrash(t *testing.T, b sandbox.Backend, image, hookDir string, points []string, kill Kill) {
	m := sandbox.NewManager(b)
	c0, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Start(c0); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	tenant := "crash-" + randHex(4)
	info, err := m.Create(c0, sandbox.Spec{Tenant: tenant, Conversation: "c", Image: image, Env: map[string]string{CommitHookEnv: hookDir}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Remove(c, info.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("cleanup of %s: %v", info.ID, err)
		}
	})
	ws := info.Workspace
	oldTree := map[string]string{"a.txt": "old a", "b.txt": "old b", "gone.txt": "to delete", "keep.txt": "kept"}
	newTree := map[string]string{"a.txt": "new a", "b.txt": "new b", "keep.txt": "kept", "new": "<dir>", "new/dir": "<dir>", "new/dir/c.txt": "c"}
	batch := []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "gone.txt", Delete: true},
		{Path: "new/dir/c.txt", Data: []byte("c"), MkdirAll: true},
		{Path: "b.txt", Data: []byte("new b")},
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := reach(ctx, t, m, tenant)
			mustSh(t, c, fmt.Sprintf("rm -rf %[1]s/* %[1]s/.[!.]* && mkdir -p %[2]s && rm -f %[2]s/stop %[2]s/reached", ws, hookDir))
			var fixture []proto.WriteFile
			for p, data := range oldTree {
				fixture = append(fixture, proto.WriteFile{Path: p, Data: []byte(data)})
			}
			if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: ws, Files: fixture}); err != nil {
				t.Fatalf("writing the old tree: %v", err)
			}
			if got := tree(ctx, t, c, ws); !maps.Equal(got, oldTree) {
				t.Fatalf("the old tree reads back as %v", got)
			}
			h, err := c.Hello(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustSh(t, c, fmt.Sprintf("echo %s > %s/stop", point, hookDir))
			done := make(chan error, 1)
			go func() { done <- c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: ws, Files: batch}) }()
			waitReached(ctx, t, c, hookDir, done)
			if err := kill(ctx, info, h.PID, point); err != nil {
				t.Fatalf("kill: %v", err)
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("the write stopped in its commit answered success")
				}
			case <-ctx.Done():
				t.Fatal("the write did not end after the agent was killed")
			}
			c = reach(ctx, t, m, tenant)
			if h2, err := c.Hello(ctx); err != nil || h2.StartedAt.Equal(h.StartedAt) && h2.PID == h.PID {
				t.Fatalf("after the kill the agent is %+v, %v; want a new one", h2, err)
			}
			mustSh(t, c, fmt.Sprintf("rm -f %[1]s/stop %[1]s/reached", hookDir))
			got := tree(ctx, t, c, ws)
			want, name := oldTree, "old"
			if committedAt(point) {
				want, name = newTree, "new"
			}
			if !maps.Equal(got, want) {
				t.Fatalf("after a kill at %q and recovery the workspace holds\n%v\nwant the %s tree\n%v", point, got, name, want)
			}
			w, err := c.Walk(ctx, &proto.WalkRequest{Root: ws, Path: "."})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range w.Files {
				if _, ok := want[f.Path]; !ok {
					t.Errorf("walk lists %s, which is not in the %s tree", f.Path, name)
				}
			}
		})
	}
}

// reach returns a working client of the sandbox, waiting (bounded by ctx)
// for a restarted agent.
func reach(ctx context.Context, t *testing.T, m *sandbox.Manager, tenant string) *agent.Client {
	t.Helper()
	var last error
	for ctx.Err() == nil {
		c, _, err := m.Agent(ctx, tenant, "c")
		if err == nil {
			if _, err = c.Hello(ctx); err == nil {
				return c
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the sandbox's agent could not be reached again: %v", last)
	return nil
}

// waitReached waits until the agent stopped at the hook's point.
func waitReached(ctx context.Context, t *testing.T, c *agent.Client, hookDir string, done <-chan error) {
	t.Helper()
	for ctx.Err() == nil {
		if _, err := c.Stat(ctx, &proto.StatRequest{Root: hookDir, Path: "reached"}); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the write ended (%v) without stopping at the hook; is the agent built with -tags commithook?", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the agent never reached the hook's point")
}

// mustSh is sh for a script that must succeed.
func mustSh(t *testing.T, c *agent.Client, script string) string {
	t.Helper()
	out, code := sh(t, c, script)
	if code != 0 {
		t.Fatalf("sh -c %q exited %d: %s", script, code, out)
	}
	return out
}

// tree lists everything under ws, hidden files included, as the shell
// sees it: path -> content, "<dir>" for a directory.
func tree(ctx context.Context, t *testing.T, c *agent.Client, ws string) map[string]string {
	t.Helper()
	out := mustSh(t, c, fmt.Sprintf(`cd %s && find . -mindepth 1 | sort | while read -r f; do
  if [ -d "$f" ]; then printf '%%s\t<dir>\n' "$f"; else printf '%%s\t%%s\n' "$f" "$(cat "$f")"; fi
done`, ws))
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if p, data, ok := strings.Cut(line, "\t"); ok {
			got[path.Clean(p)] = data
		}
	}
	return got
}
