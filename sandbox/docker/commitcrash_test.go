package docker

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// hookedBackend is a Backend whose sandboxes run an agent built with the
// commit hook (as their PID 1, like every sandbox).
func hookedBackend(t *testing.T) *Backend {
	t.Helper()
	hooked, err := sandboxtest.BuildAgentTagged(t.TempDir(), "sandbox-agent-commithook", "commithook")
	if err != nil {
		t.Fatal(err)
	}
	return newTestBackend(t, WithAgentBinary(hooked))
}

// TestCommitSurvivesAgentKill kills a sandbox's agent, its PID 1, with
// SIGKILL inside a commit (the container dies with it) and starts the
// container again: the agent settles the journal it kept on the
// container's file system before it serves.
func TestCommitSurvivesAgentKill(t *testing.T) {
	needDocker(t)
	b := hookedBackend(t)
	points := []string{"staged", "committed", "applied:1", "cleaned"}
	sandboxtest.CommitCrash(t, b, testImage, "/tmp/commit-hook", points, func(ctx context.Context, info sandbox.Info, _ int, _ string) error {
		name := NamePrefix + info.ID
		if err := b.cli.ContainerKill(ctx, name, "KILL"); err != nil {
			return err
		}
		exited, failed := b.cli.ContainerWait(ctx, name, container.WaitConditionNotRunning)
		select {
		case <-exited:
		case err := <-failed:
			return err
		}
		return b.cli.ContainerStart(ctx, name, container.StartOptions{})
	})
}

// TestCommitSurvivesContainerRestart restarts the container mid-commit:
// the agent gets SIGTERM while its commit is stopped, exits, and the new
// PID 1 settles the commit.
func TestCommitSurvivesContainerRestart(t *testing.T) {
	needDocker(t)
	b := hookedBackend(t)
	sandboxtest.CommitCrash(t, b, testImage, "/tmp/commit-hook", []string{"applied:0"}, func(ctx context.Context, info sandbox.Info, _ int, _ string) error {
		timeout := 5
		return b.cli.ContainerRestart(ctx, NamePrefix+info.ID, container.StopOptions{Timeout: &timeout})
	})
}
