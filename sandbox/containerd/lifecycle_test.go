package containerd

import (
	"context"
	"errors"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// TestLifecycleInEngine checks what containerd itself holds (what `ctr`
// shows): a hibernated sandbox has no task, so no process and no memory,
// and carries the mark; a woken one runs and has lost it. A sandbox stopped
// without a hibernation stays stopped, since its exit when the task is
// kept, since an unknown time when it is gone (as after a reboot), and
// wakes from either.
func TestLifecycleInEngine(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	info, err := b.Create(ctx(t), sandbox.Spec{Tenant: "ct-" + newID(), Conversation: "marks", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Remove(c, info.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	id := info.ID
	engine := func() (map[string]string, *containerd.Status) {
		t.Helper()
		c, err := b.cli.LoadContainer(b.nsCtx(ctx(t)), NamePrefix+id)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Labels(b.nsCtx(ctx(t)))
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.Task(b.nsCtx(ctx(t)), nil)
		if cerrdefs.IsNotFound(err) {
			return l, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := task.Status(b.nsCtx(ctx(t)))
		if err != nil {
			t.Fatal(err)
		}
		return l, &st
	}
	state := func(want string) sandbox.Info {
		t.Helper()
		got, err := b.Inspect(ctx(t), id)
		if err != nil || got.State != want {
			t.Fatalf("Inspect = %q, %v; want %s", got.State, err, want)
		}
		return got
	}

	if err := b.Hibernate(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	l, task := engine()
	if task != nil {
		t.Fatalf("a hibernated sandbox still has a task in containerd: %+v", *task)
	}
	if at := labelTime(l, LabelHibernatedAt); at.IsZero() || !state(sandbox.StateHibernated).StateSince.Equal(at) {
		t.Fatalf("the container's mark %s=%q does not say when the sandbox hibernated", LabelHibernatedAt, l[LabelHibernatedAt])
	}

	if err := b.Wake(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	l, task = engine()
	if task == nil || task.Status != containerd.Running {
		t.Fatalf("the woken sandbox's task is %+v, want running", task)
	}
	if m, ok := l[LabelHibernatedAt]; ok {
		t.Fatalf("the woken sandbox keeps the mark %s=%q", LabelHibernatedAt, m)
	}

	// Killed behind sandboxd's back: the task stays, stopped.
	before := time.Now()
	if err := b.Stop(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	var stopped sandbox.Info
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := b.Inspect(ctx(t), id)
		if err == nil && got.State == sandbox.StateStopped {
			stopped = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed sandbox is %q, %v after 30s; want stopped", got.State, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if stopped.StateSince.Before(before.Add(-time.Second)) || stopped.StateSince.After(time.Now()) {
		t.Errorf("the killed sandbox is stopped since %v; want the time it was killed (after %v)", stopped.StateSince, before)
	}
	for name, verb := range map[string]func(context.Context, string) error{"Pause": b.Pause, "Unpause": b.Unpause} {
		if err := verb(ctx(t), id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("%s of a stopped sandbox = %v; want failed_precondition", name, err)
		}
	}
	// The exited task makes way for a new one.
	if err := b.Wake(ctx(t), id); err != nil {
		t.Fatalf("Wake of a killed sandbox: %v", err)
	}
	state(sandbox.StateRunning)
	if err := b.Stop(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	// The task gone too, as a reboot leaves it: stopped, since when unknown.
	c, err := b.cli.LoadContainer(b.nsCtx(ctx(t)), NamePrefix+id)
	if err != nil {
		t.Fatal(err)
	}
	task2, err := c.Task(b.nsCtx(ctx(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task2.Delete(b.nsCtx(ctx(t)), containerd.WithProcessKill); err != nil {
		t.Fatal(err)
	}
	if got := state(sandbox.StateStopped); !got.StateSince.IsZero() {
		t.Errorf("a sandbox without a task and without the mark is stopped since %v; want an unknown time", got.StateSince)
	}
	if err := b.Wake(ctx(t), id); err != nil {
		t.Fatalf("Wake of a stopped sandbox: %v", err)
	}
	state(sandbox.StateRunning)
}
