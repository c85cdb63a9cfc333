package host

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// TestCommitSurvivesAgentKill kills the host backend's agent (a local
// process) with SIGKILL at every step of a write_files commit and checks
// that the restarted agent leaves the old tree or the new one.
func TestCommitSurvivesAgentKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an agent with the commit hook")
	}
	hooked, err := sandboxtest.BuildAgentTagged(t.TempDir(), "sandbox-agent-commithook", "commithook")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	b, err := New(data, WithAgentBinary(hooked))
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.CommitCrash(t, b, "", t.TempDir(), sandboxtest.CommitPoints, func(ctx context.Context, info sandbox.Info, pid int, point string) error {
		// The journal is kept beside the workspace, in the sandbox's folder,
		// until the batch is settled ("done" comes after its removal).
		journals, _ := filepath.Glob(filepath.Join(data, "sandboxes", info.ID, "agent-state", "*.journal"))
		if want := point != "done"; (len(journals) == 1) != want {
			t.Errorf("at %q the sandbox's agent-state holds journals %v; want one: %v", point, journals, want)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
		// Gone once signal 0 finds no such process (or only its zombie,
		// which holds no lock and no file).
		for ctx.Err() == nil {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return ctx.Err()
	})
}
