package sandbox

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// sleepyFake is the fake engine with the lifecycle's capabilities: a pause
// and a hibernation only change the box's state (a hibernation drops its
// agent, whose processes end with it).
type sleepyFake struct {
	*fakeBackend
}

var (
	_ Freezer    = sleepyFake{}
	_ Hibernator = sleepyFake{}
)

func (s sleepyFake) to(id, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if !ok {
		return errdefs.NotFound("no box %s", id)
	}
	if b.State == from || from == "" {
		b.State = to
		b.Labels = maps.Clone(b.Labels)
		delete(b.Labels, LabelPausedAt)
		if to == StatePaused {
			b.Labels[LabelPausedAt] = time.Now().UTC().Format(time.RFC3339Nano)
		}
		s.boxes[id] = b
	}
	if to == StateHibernated {
		if d := s.daemons[id]; d != nil {
			d.Close()
			delete(s.daemons, id)
		}
	}
	return nil
}

func (s sleepyFake) Pause(_ context.Context, id string) error {
	return s.to(id, StateRunning, StatePaused)
}
func (s sleepyFake) Unpause(_ context.Context, id string) error {
	return s.to(id, StatePaused, StateRunning)
}
func (s sleepyFake) Hibernate(_ context.Context, id string) error {
	return s.to(id, "", StateHibernated)
}
func (s sleepyFake) Wake(_ context.Context, id string) error {
	return s.to(id, StateHibernated, StateRunning)
}

func TestVerbsAreIdempotentAndCallsWake(t *testing.T) {
	f := sleepyFake{newFake(t)}
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		verb func(context.Context, string, string) (Info, error)
		want string
	}{{m.Pause, StatePaused}, {m.Pause, StatePaused}, {m.Resume, StateRunning}, {m.Resume, StateRunning},
		{m.Hibernate, StateHibernated}, {m.Hibernate, StateHibernated}, {m.Pause, StateHibernated}, {m.Resume, StateRunning}} {
		got, err := step.verb(ctx, "acme", info.ID)
		if err != nil || got.State != step.want || got.StateSince.IsZero() {
			t.Fatalf("want %s: %+v %v", step.want, got, err)
		}
	}
	// A call on a paused and on a hibernated sandbox resumes it first.
	for _, verb := range []func(context.Context, string, string) (Info, error){m.Pause, m.Hibernate} {
		if _, err := verb(ctx, "acme", info.ID); err != nil {
			t.Fatal(err)
		}
		c, got, err := m.Agent(ctx, "acme", "c1")
		if err != nil || got.State != StateRunning {
			t.Fatalf("a call on a sleeping sandbox: %+v %v", got, err)
		}
		if _, err := c.Hello(ctx); err != nil {
			t.Fatalf("the pipe handed out after the resume: %v", err)
		}
	}
	// Another tenant's sandbox is not found, whatever the verb.
	if _, err := m.Pause(ctx, "other", info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's pause: %v", err)
	}
}

func TestIdleLifecycleSteps(t *testing.T) {
	f := sleepyFake{newFake(t)}
	m := startManager(t, f, WithLifecycle(func(Info) Lifecycle { return Lifecycle{HibernateAfter: 400 * time.Millisecond} }))
	ctx := testCtx(t)
	own, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "own", Lifecycle: Lifecycle{PauseAfter: time.Second, DeleteAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	def, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "default"})
	if err != nil {
		t.Fatal(err)
	}
	state := func(id string) string {
		i, err := m.Get(ctx, "acme", id)
		if err != nil {
			return err.Error()
		}
		return i.State
	}
	eventually(t, "the sandbox with its own lifecycle paused", func() bool { return state(own.ID) == StatePaused })
	eventually(t, "the sandbox with the default lifecycle hibernated", func() bool { return state(def.ID) == StateHibernated })
	if state(own.ID) != StatePaused {
		t.Fatalf("its own lifecycle has no hibernation, yet it is %s", state(own.ID))
	}
	if _, _, err := m.Agent(ctx, "acme", "own"); err != nil {
		t.Fatal(err)
	}
	if state(own.ID) != StateRunning {
		t.Fatalf("after a call the sandbox is %s", state(own.ID))
	}
}

func TestLifecycleLabelRoundTrip(t *testing.T) {
	l := Lifecycle{PauseAfter: 2 * time.Second, HibernateAfter: time.Hour, DeleteAfter: 48 * time.Hour}
	got, err := LifecycleOf(Info{Labels: LifecycleLabels(Spec{Lifecycle: l})})
	if err != nil || got != l {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if LifecycleLabels(Spec{}) != nil {
		t.Fatal("a zero lifecycle gets a label")
	}
	if _, err := LifecycleOf(Info{ID: "x", Labels: map[string]string{LabelLifecycle: "{"}}); err == nil {
		t.Fatal("a broken label parses")
	}
}

// A lifecycle label the engine reports anew (an annotation changed on
// Kubernetes, say) is the one followed after the next refresh, not the one
// the sandbox was created with.
func TestIdleLifecycleFollowsANewLabel(t *testing.T) {
	f := sleepyFake{newFake(t)}
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1", Lifecycle: Lifecycle{DeleteAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	b := f.boxes[info.ID]
	b.Labels = maps.Clone(b.Labels)
	maps.Copy(b.Labels, LifecycleLabels(Spec{Lifecycle: Lifecycle{PauseAfter: time.Second}}))
	f.boxes[info.ID] = b
	f.mu.Unlock()
	if err := m.refresh(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relabelled sandbox paused", func() bool {
		i, err := m.Get(ctx, "acme", info.ID)
		return err == nil && i.State == StatePaused
	})
}
