package docker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

var (
	_ sandbox.Freezer    = (*Backend)(nil)
	_ sandbox.Hibernator = (*Backend)(nil)
)

// hibernateGrace is how long the agent's init has to record its processes
// and exit after the hibernation signal before it is killed; wakeWait
// bounds a start until the engine says the container runs.
const (
	hibernateGrace = 10 * time.Second
	wakeWait       = 30 * time.Second
)

// Pause freezes every process of the sandbox (docker pause).
func (b *Backend) Pause(ctx context.Context, id string) error {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case c.State != nil && c.State.Paused:
		return nil
	case c.State == nil || !c.State.Running:
		return errdefs.FailedPrecondition("sandbox %s is not running (%s), so it cannot be paused; resume it first", id, mapStateOf(c))
	}
	if err := b.record(ctx, PauseVolumePrefix, id); err != nil {
		return err
	}
	if err := b.pauseRetrying(ctx, c.ID); err != nil {
		b.drop(context.WithoutCancel(ctx), PauseVolumePrefix, id)
		return engineErr("pause sandbox "+id, err)
	}
	return nil
}

// Freezing a cgroup fails when its processes keep changing while runc
// waits for them to stop (a burst of forks on a loaded machine): runc then
// gives up with "unable to freeze" and leaves the sandbox running. Another
// try a moment later, when the burst has passed, usually freezes it.
const (
	pauseTries = 4
	pauseRetry = 250 * time.Millisecond
)

// pauseRetrying pauses container id, trying again after a failure to
// freeze, at most pauseTries times in all, within ctx.
func (b *Backend) pauseRetrying(ctx context.Context, id string) error {
	var err error
	for try := 1; ; try++ {
		if err = b.cli.ContainerPause(ctx, id); err == nil || try == pauseTries || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * pauseRetry):
		}
	}
}

// Unpause thaws a paused sandbox; a running one is left alone.
func (b *Backend) Unpause(ctx context.Context, id string) error {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case c.State != nil && c.State.Running && !c.State.Paused:
		b.drop(ctx, PauseVolumePrefix, id)
		return nil
	case c.State == nil || !c.State.Paused:
		return errdefs.FailedPrecondition("sandbox %s is %s, not paused; resume it instead", id, mapStateOf(c))
	}
	if err := b.cli.ContainerUnpause(ctx, c.ID); err != nil {
		return engineErr("unpause sandbox "+id, err)
	}
	b.drop(ctx, PauseVolumePrefix, id)
	return nil
}

// Hibernate stops the sandbox's processes, keeping its container (its own
// file system changes) and its workspace volume. The restart policy is
// set to "no" first, or the engine would start the container again the
// moment its init exits; the init is sent the hibernation signal so that
// it records its processes and exits with the status that marks the
// hibernation, and is killed if it has not within hibernateGrace.
func (b *Backend) Hibernate(ctx context.Context, id string) error {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c.Config != nil && c.Config.Labels[sandbox.LabelRuntime] == sandbox.RuntimeGVisor {
		return noGVisorHibernation(id)
	}
	if c.State == nil || (!c.State.Running && !c.State.Paused && !c.State.Restarting) {
		if mapStateOf(c) == sandbox.StateHibernated || b.recordOf(ctx, HibernateVolumePrefix, id) != "" {
			return nil
		}
		return errdefs.FailedPrecondition("sandbox %s is %s, not running, so there is nothing to hibernate; resume it first", id, mapStateOf(c))
	}
	if _, err := b.cli.ContainerUpdate(ctx, c.ID, container.UpdateConfig{RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled}}); err != nil {
		return engineErr("hibernate sandbox "+id+" (set its restart policy)", err)
	}
	if err := b.record(ctx, HibernateVolumePrefix, id); err != nil {
		return err
	}
	// From here on the sandbox reads as hibernated once it stops, however
	// it stops; the exit status says whether its agent recorded its
	// processes.
	if c.State.Paused {
		if err := b.cli.ContainerUnpause(ctx, c.ID); err != nil {
			return engineErr("hibernate sandbox "+id+" (thaw it first)", err)
		}
		b.drop(ctx, PauseVolumePrefix, id)
	}
	if err := b.cli.ContainerKill(ctx, c.ID, "SIGPWR"); err != nil {
		return engineErr("hibernate sandbox "+id+" (signal its agent)", err)
	}
	if err := b.waitExit(ctx, c.ID, hibernateGrace); err != nil {
		// Killed: still hibernated by its record, its processes only not
		// recorded as stopped by hibernation.
		b.log.Warn("the agent did not exit on the hibernation signal; killing the sandbox's processes", "id", id, "err", err)
		if err := b.cli.ContainerKill(ctx, c.ID, "SIGKILL"); err != nil {
			return engineErr("hibernate sandbox "+id+" (kill it)", err)
		}
		if err := b.waitExit(ctx, c.ID, hibernateGrace); err != nil {
			return errdefs.Unavailable("sandbox %s did not stop within %s of being killed: %v; retry", id, 2*hibernateGrace, err)
		}
	}
	return nil
}

// waitExit waits until the container no longer runs.
func (b *Backend) waitExit(ctx context.Context, cid string, within time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ok, errc := b.cli.ContainerWait(wctx, cid, container.WaitConditionNotRunning)
	select {
	case <-ok:
		return nil
	case err := <-errc:
		if wctx.Err() != nil {
			return errors.New("still running after " + within.String())
		}
		return err
	}
}

// Wake starts a hibernated (or stopped) sandbox again with its restart
// policy restored; its agent's init runs as at creation.
func (b *Backend) Wake(ctx context.Context, id string) error {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c.State != nil && c.State.Paused {
		return errdefs.FailedPrecondition("sandbox %s is paused, not hibernated; unpause it", id)
	}
	if _, err := b.cli.ContainerUpdate(ctx, c.ID, container.UpdateConfig{RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}}); err != nil {
		return engineErr("wake sandbox "+id+" (restore its restart policy)", err)
	}
	if c.State != nil && c.State.Running {
		b.drop(ctx, HibernateVolumePrefix, id)
		return nil
	}
	if err := b.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return engineErr("wake sandbox "+id, err)
	}
	deadline := time.Now().Add(wakeWait)
	for {
		c, err = b.inspect(ctx, id)
		if err != nil {
			return err
		}
		if c.State != nil && c.State.Running {
			b.drop(ctx, HibernateVolumePrefix, id)
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.Unavailable("sandbox %s did not run within %s of being started (%s); retry", id, wakeWait, mapStateOf(c))
		}
		select {
		case <-ctx.Done():
			return errdefs.DeadlineExceeded("waking sandbox %s: %v", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mapStateOf is the API state of an inspected container.
func mapStateOf(c container.InspectResponse) string {
	if c.State == nil {
		return sandbox.StateStopped
	}
	return mapState(string(c.State.Status), c.State.ExitCode)
}

// exitCodeOf reads the status a listed container exited with from its
// status line ("Exited (75) 3 minutes ago"); -1 when it has none.
func exitCodeOf(status string) int {
	rest, ok := strings.CutPrefix(status, "Exited (")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ')'), 0)])
	if err != nil {
		return -1
	}
	return n
}

// stateSince is when the container entered its state, where the engine
// says: started for a running one, finished for a stopped one (a pause
// has no time in the engine).
func stateSince(c container.InspectResponse) time.Time {
	if c.State == nil || c.State.Paused {
		return time.Time{}
	}
	at := c.State.FinishedAt
	if c.State.Running {
		at = c.State.StartedAt
	}
	return engineTime(at)
}

// engineTime parses one of the engine's state times; the engine writes
// the zero time of year 1 for one that has not happened.
func engineTime(at string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || t.Year() < 2000 {
		return time.Time{}
	}
	return t.UTC()
}
