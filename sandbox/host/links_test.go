package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// On the host backend the workspace shares the machine's file system, so
// a hard link made through a command to a file outside would read back
// that file: the agent refuses files with more than one link, with an
// error message saying to copy the file.
func TestHardLinkOutsideIsRefused(t *testing.T) {
	b := newBackend(t, t.TempDir())
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "links"})
	if err != nil {
		t.Fatal(err)
	}
	// The agent daemon outlives the manager by design: remove the sandbox.
	t.Cleanup(func() { b.Remove(context.Background(), info.ID) })
	c, _, err := m.Agent(ctx(t), "t", "links")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"ln", outside, "leak"}, Dir: info.Workspace, Timeout: 10 * time.Second})
	if err != nil || ex.ExitCode != 0 {
		t.Skipf("ln across into the workspace failed here (%+v, %v): nothing to refuse", ex, err)
	}
	_, err = c.ReadFile(ctx(t), &proto.ReadFileRequest{Root: info.Workspace, Path: "leak"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hard links") || !strings.Contains(err.Error(), "cp leak") {
		t.Fatalf("read of a hard link to a file outside = %v, want failed_precondition saying to copy it", err)
	}
	// The copy the error message suggests is the workspace's own and reads.
	ex, err = c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "cp leak leak.copy && mv leak.copy leak"}, Dir: info.Workspace, Timeout: 10 * time.Second})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("copy: %+v, %v", ex, err)
	}
	r, err := c.ReadFile(ctx(t), &proto.ReadFileRequest{Root: info.Workspace, Path: "leak"})
	if err != nil || string(r.Data) != "outside content\n" {
		t.Fatalf("read of the copy = %+v, %v", r, err)
	}
	if err := os.WriteFile(filepath.Join(info.Workspace, "leak"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside content\n" {
		t.Errorf("the outside file changed through the copy: %q", b)
	}
}
