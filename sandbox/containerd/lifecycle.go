package containerd

import (
	"context"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Labels the lifecycle keeps on a container record. containerd keeps a
// container without its task, so a hibernated sandbox is a container with
// no task and LabelHibernatedAt; the times make Info.StateSince, the same
// for every replica and after a restart. A label's value is RFC 3339.
const (
	// LabelHibernatedAt is when the sandbox's task was stopped for a
	// hibernation; Wake removes it.
	LabelHibernatedAt = "io.sandboxd.hibernated-at"
	// LabelPausedAt is when Pause froze the task; it counts only while the
	// task is frozen.
	LabelPausedAt = "io.sandboxd.paused-at"
	// LabelRunningSince is when Unpause or Wake made the task run again;
	// without it a running sandbox runs since its creation.
	LabelRunningSince = "io.sandboxd.running-since"
)

const (
	// hibernateGrace is how long the init has to record its processes and
	// exit after SignalHibernate before it is killed. An init that does not
	// handle the signal ignores it (the kernel drops a signal PID 1 has no
	// handler for), so the hibernation still ends, later.
	hibernateGrace = 10 * time.Second
	// transitionTimeout bounds what a transition does once it has begun to
	// stop or start the task, whatever happens to the caller's context: a
	// hibernation cut in the middle would leave a sandbox half stopped.
	transitionTimeout = 45 * time.Second
	// settleTimeout bounds the wait for a task caught pausing to be paused.
	settleTimeout = 10 * time.Second
)

var (
	_ sandbox.Freezer    = (*Backend)(nil)
	_ sandbox.Hibernator = (*Backend)(nil)
)

// Pause freezes every process of the sandbox (the task's cgroup freezer).
// Pausing a paused sandbox changes nothing; a sandbox that does not run
// cannot be paused.
func (b *Backend) Pause(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, t, st, err := b.task(ctx, id)
	if err != nil {
		return err
	}
	if st.Status == containerd.Pausing {
		// Another caller is freezing it: its outcome is the answer.
		if err := b.settle(ctx, t, id); err != nil {
			return err
		}
		if st, err = t.Status(ctx); err != nil {
			return engineErr("read the task status of sandbox "+id, err)
		}
	}
	switch st.Status {
	case containerd.Paused:
		return nil
	case containerd.Running:
	default:
		return b.notRunning(ctx, c, id, "paused")
	}
	// The mark goes first: it counts only while the task is frozen, so a
	// freeze that fails leaves it unread.
	if err := b.setLabels(ctx, c, id, map[string]string{LabelPausedAt: stamp(time.Now())}); err != nil {
		return err
	}
	if err := t.Pause(ctx); err != nil {
		if st, serr := t.Status(ctx); serr == nil && st.Status == containerd.Paused {
			return nil // paused by another caller meanwhile
		}
		return engineErr("pause sandbox "+id, err)
	}
	return nil
}

// Unpause thaws a paused sandbox. Unpausing a running one changes nothing;
// a hibernated or stopped one cannot be unpaused.
func (b *Backend) Unpause(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, t, st, err := b.task(ctx, id)
	if err != nil {
		return err
	}
	switch st.Status {
	case containerd.Running:
		return nil
	case containerd.Paused, containerd.Pausing:
	default:
		return b.notRunning(ctx, c, id, "unpaused")
	}
	return b.thaw(ctx, c, t, id)
}

// thaw resumes a paused (or pausing) task and marks when it ran again.
func (b *Backend) thaw(ctx context.Context, c containerd.Container, t containerd.Task, id string) error {
	if err := b.settle(ctx, t, id); err != nil {
		return err
	}
	if err := t.Resume(ctx); err != nil {
		if st, serr := t.Status(ctx); serr != nil || st.Status != containerd.Running {
			return engineErr("unpause sandbox "+id, err)
		}
	}
	return b.setLabels(ctx, c, id, map[string]string{LabelPausedAt: "", LabelRunningSince: stamp(time.Now())})
}

// Hibernate stops every process of a running or paused sandbox and deletes
// its task, which frees its memory; the container and its snapshot (the
// sandbox's own file system changes) stay, as does the workspace. The init
// is sent sandbox.SignalHibernate so that it records its processes as
// stopped by the hibernation, and killed if it has not exited within
// hibernateGrace. Hibernating a hibernated sandbox changes nothing; a
// stopped one is only marked, since it has no process left to stop.
func (b *Backend) Hibernate(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return err
	}
	l, err := c.Labels(ctx)
	if err != nil {
		return engineErr("read the labels of sandbox "+id, err)
	}
	t, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		if l[LabelHibernatedAt] != "" {
			return nil
		}
		return b.setLabels(ctx, c, id, map[string]string{LabelHibernatedAt: stamp(time.Now()), LabelPausedAt: ""})
	}
	if err != nil {
		return engineErr("find the task of sandbox "+id, err)
	}
	st, err := t.Status(ctx)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("read the task status of sandbox "+id, err)
	}
	// From here the transition runs to its end even when the caller gives
	// up: the sandbox must be either running or hibernated, never between.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), transitionTimeout)
	defer cancel()
	// A task stopped already keeps the mark it has (it tells when the
	// hibernation stopped it); one this call stops gets a new one.
	at, mark := time.Now(), l[LabelHibernatedAt] == ""
	switch st.Status {
	case containerd.Paused, containerd.Pausing:
		// A frozen init cannot handle the signal.
		if err := b.thaw(tctx, c, t, id); err != nil {
			return err
		}
		fallthrough
	case containerd.Running:
		if at, err = b.stopInit(tctx, t, id); err != nil {
			return err
		}
		mark = true
	default:
		// Stopped already (or never started): there is nothing to signal.
		if !st.ExitTime.IsZero() && st.Status == containerd.Stopped {
			at = st.ExitTime
		}
	}
	// The mark goes before the task is deleted, so that no moment shows a
	// sandbox without a task and without the mark (which reads "stopped").
	if mark {
		if err := b.setLabels(tctx, c, id, map[string]string{LabelHibernatedAt: stamp(at), LabelPausedAt: ""}); err != nil {
			return err
		}
	}
	if _, err := t.Delete(tctx, withProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("delete the stopped task of sandbox "+id, err)
	}
	return nil
}

// stopInit sends the init sandbox.SignalHibernate, waits up to
// hibernateGrace for it to exit, then kills it; it returns when the task
// has exited.
func (b *Backend) stopInit(ctx context.Context, t containerd.Task, id string) (time.Time, error) {
	// Waiting starts before the signal, so that the exit cannot be missed.
	exited, err := t.Wait(ctx)
	if err != nil {
		return time.Time{}, engineErr("wait for the task of sandbox "+id, err)
	}
	if err := killStopped(ctx, t, t.Kill(ctx, sandbox.SignalHibernate)); err != nil {
		return time.Time{}, engineErr("signal the hibernation to sandbox "+id, err)
	}
	grace := time.NewTimer(hibernateGrace)
	defer grace.Stop()
	select {
	case st := <-exited:
		return exitTime(st), nil
	case <-ctx.Done():
		return time.Time{}, engineErr("stop the processes of sandbox "+id, ctx.Err())
	case <-grace.C:
	}
	b.log.Info("the sandbox's init did not exit on the hibernation signal; killing it", "sandbox", id, "after", hibernateGrace)
	if err := killStopped(ctx, t, t.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)); err != nil {
		return time.Time{}, engineErr("kill the processes of sandbox "+id, err)
	}
	select {
	case st := <-exited:
		return exitTime(st), nil
	case <-ctx.Done():
		return time.Time{}, engineErr("stop the processes of sandbox "+id, ctx.Err())
	}
}

func exitTime(st containerd.ExitStatus) time.Time {
	if at := st.ExitTime(); !at.IsZero() {
		return at
	}
	return time.Now()
}

// Wake starts a new task for a hibernated (or stopped) sandbox, as Create
// started its first one: the same spec (the agent's init as PID 1, a fresh
// network namespace with only lo, the workspace and the agent bind-mounted)
// on the container's own snapshot, which kept its file system changes.
// It returns once the task runs. Waking a running sandbox changes nothing;
// waking a paused one unpauses it.
func (b *Backend) Wake(ctx context.Context, id string) error {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	switch {
	case cerrdefs.IsNotFound(err):
		t = nil
	case err != nil:
		return engineErr("find the task of sandbox "+id, err)
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), transitionTimeout)
	defer cancel()
	if t != nil {
		st, err := t.Status(ctx)
		if err != nil && !cerrdefs.IsNotFound(err) {
			return engineErr("read the task status of sandbox "+id, err)
		}
		switch st.Status {
		case containerd.Running:
			// A wake cut short after the start may have left the mark.
			return b.clearMark(ctx, c, id)
		case containerd.Paused, containerd.Pausing:
			if err := b.thaw(ctx, c, t, id); err != nil {
				return err
			}
			return b.clearMark(ctx, c, id)
		}
		// An exited task, or one made by a wake cut short before its start:
		// a task cannot be started twice, so it makes way for a new one.
		if _, err := t.Delete(tctx, withProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			return engineErr("delete the old task of sandbox "+id, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return engineErr("wake sandbox "+id, err)
	}
	// As at creation: the init's stdio goes nowhere (the agent logs into its
	// own files), so the sandbox never depends on sandboxd reading a FIFO.
	nt, err := c.NewTask(tctx, cio.NullIO)
	if err != nil {
		return engineErr("create a new task for sandbox "+id, err)
	}
	if err := nt.Start(tctx); err != nil {
		if _, derr := nt.Delete(tctx, withProcessKill); derr != nil {
			b.log.Warn("cannot delete a task that failed to start", "sandbox", id, "err", derr)
		}
		return engineErr("start the task of sandbox "+id, err)
	}
	started := time.Now()
	st, err := nt.Status(tctx)
	if err != nil {
		return engineErr("read the task status of sandbox "+id, err)
	}
	if st.Status != containerd.Running {
		return errdefs.Unavailable("sandbox %s stopped right after it was woken (its task is %s, exit status %d); inspect it with `ctr -n %s task ls` and retry", id, st.Status, st.ExitStatus, b.ns)
	}
	return b.setLabels(tctx, c, id, map[string]string{LabelHibernatedAt: "", LabelPausedAt: "", LabelRunningSince: stamp(started)})
}

// clearMark removes a hibernation mark left on a running sandbox.
func (b *Backend) clearMark(ctx context.Context, c containerd.Container, id string) error {
	l, err := c.Labels(ctx)
	if err != nil {
		return engineErr("read the labels of sandbox "+id, err)
	}
	if l[LabelHibernatedAt] == "" {
		return nil
	}
	return b.setLabels(ctx, c, id, map[string]string{LabelHibernatedAt: ""})
}

// task loads sandbox id with its task and the task's status; a sandbox
// without a task has a nil task and the status Unknown.
func (b *Backend) task(ctx context.Context, id string) (containerd.Container, containerd.Task, containerd.Status, error) {
	c, err := b.load(ctx, id)
	if err != nil {
		return nil, nil, containerd.Status{}, err
	}
	t, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return c, nil, containerd.Status{Status: containerd.Unknown}, nil
	}
	if err != nil {
		return nil, nil, containerd.Status{}, engineErr("find the task of sandbox "+id, err)
	}
	st, err := t.Status(ctx)
	if cerrdefs.IsNotFound(err) {
		return c, nil, containerd.Status{Status: containerd.Unknown}, nil
	}
	if err != nil {
		return nil, nil, containerd.Status{}, engineErr("read the task status of sandbox "+id, err)
	}
	return c, t, st, nil
}

// settle waits (bounded) for a task caught pausing to be paused.
func (b *Backend) settle(ctx context.Context, t containerd.Task, id string) error {
	deadline := time.Now().Add(settleTimeout)
	for {
		st, err := t.Status(ctx)
		if err != nil {
			return engineErr("read the task status of sandbox "+id, err)
		}
		if st.Status != containerd.Pausing {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.Unavailable("sandbox %s has been pausing for %s; containerd may be stuck, retry later", id, settleTimeout)
		}
		select {
		case <-ctx.Done():
			return engineErr("wait for sandbox "+id+" to pause", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notRunning is the error for a verb that needs a running or paused task.
func (b *Backend) notRunning(ctx context.Context, c containerd.Container, id, verb string) error {
	if l, err := c.Labels(ctx); err == nil && l[LabelHibernatedAt] != "" {
		return errdefs.FailedPrecondition("sandbox %s is hibernated and cannot be %s; resume it first", id, verb)
	}
	return errdefs.FailedPrecondition("sandbox %s is not running and cannot be %s; resume it first, or delete it and create a new one", id, verb)
}

// setLabels sets labels on the container record (an empty value removes
// one).
func (b *Backend) setLabels(ctx context.Context, c containerd.Container, id string, l map[string]string) error {
	if _, err := c.SetLabels(ctx, l); err != nil {
		return engineErr("label sandbox "+id, err)
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// labelTime is the time in label key, zero when it is missing or unreadable.
func labelTime(l map[string]string, key string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, l[key])
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
