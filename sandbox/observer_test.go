package sandbox

import (
	"slices"
	"sync"
	"testing"
)

type changeLog struct {
	mu  sync.Mutex
	got []string
}

func (l *changeLog) SandboxChanged(info Info, change string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, info.Tenant+"/"+info.Conversation+" "+change)
}

func TestLifecycleObserverHearsEachChangeOnce(t *testing.T) {
	f := sleepyFake{newFake(t)}
	var log changeLog
	m := startManager(t, f, WithLifecycleObserver(&log))
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	// A verb that changes nothing (a second pause) is not a change.
	for _, verb := range []func(tenant, id string) (Info, error){
		func(tn, id string) (Info, error) { return m.Pause(ctx, tn, id) },
		func(tn, id string) (Info, error) { return m.Pause(ctx, tn, id) },
		func(tn, id string) (Info, error) { return m.Resume(ctx, tn, id) },
		func(tn, id string) (Info, error) { return m.Hibernate(ctx, tn, id) },
	} {
		if _, err := verb("acme", info.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A call on the hibernated sandbox wakes it: a resume too.
	if _, _, err := m.Agent(ctx, "acme", "c1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "acme", info.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{"acme/c1 created", "acme/c1 paused", "acme/c1 resumed", "acme/c1 hibernated", "acme/c1 resumed", "acme/c1 deleted"}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.got, want) {
		t.Errorf("changes heard:\n%q\nwant\n%q", log.got, want)
	}
}
