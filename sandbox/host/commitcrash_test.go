package host

import (
	"context"
	"errors"
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
	b, err := New(t.TempDir(), WithAgentBinary(hooked))
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.CommitCrash(t, b, "", t.TempDir(), sandboxtest.CommitPoints, func(ctx context.Context, _ sandbox.Info, pid int) error {
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
