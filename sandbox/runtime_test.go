package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// A backend that serves runc alone refuses gvisor and a read-only root in
// a sentence, and stamps runc on what it makes.
func TestCreateRefusesWhatTheBackendCannotServe(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	for spec, want := range map[*Spec]string{
		{Tenant: "t", Conversation: "c1", Runtime: RuntimeGVisor}: `does not serve runtime "gvisor"`,
		{Tenant: "t", Conversation: "c1", ReadOnlyRoot: true}:     "cannot make a sandbox with a read-only root",
	} {
		_, err := m.Create(ctx, *spec)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want failed_precondition saying %q", *spec, err, want)
		}
	}
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c1", Runtime: "kata"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("runtime kata: %v, want invalid_argument", err)
	}
	if l := RuntimeLabels(Spec{}); l[LabelRuntime] != RuntimeRunc || RuntimeOf(Info{}) != RuntimeRunc {
		t.Errorf("an unnamed runtime stamps %v and reads %q, want runc", l, RuntimeOf(Info{}))
	}
}

// refusingBackend says why it does not serve gVisor.
type refusingBackend struct {
	*fakeBackend
	why error
}

func (r refusingBackend) RefuseRuntime(rt string) error {
	if rt == RuntimeGVisor {
		return r.why
	}
	return nil
}

// A backend that says why it does not serve a runtime is refused in its
// words (what to install), not the generic sentence; runc still works.
func TestCreateRefusesInTheBackendsWords(t *testing.T) {
	why := errdefs.FailedPrecondition("install runsc")
	m := startManager(t, refusingBackend{newFake(t), why})
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c1", Runtime: RuntimeGVisor}); err != why {
		t.Errorf("gvisor: %v, want the backend's %v", err, why)
	}
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c1", Runtime: RuntimeRunc}); err != nil {
		t.Errorf("runc: %v", err)
	}
}
