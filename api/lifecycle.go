package api

import (
	"context"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox's lifecycle: pause, hibernate and resume on request, and what
// idleness does to it (package sandbox).

// Lifecycler is an optional capability of Sandboxes: the lifecycle's verbs
// (sandbox.Manager).
type Lifecycler interface {
	Pause(ctx context.Context, tenant, id string) (sandbox.Info, error)
	Hibernate(ctx context.Context, tenant, id string) (sandbox.Info, error)
	Resume(ctx context.Context, tenant, id string) (sandbox.Info, error)
}

var _ Lifecycler = (*sandbox.Manager)(nil)

// Lifecycle is what idleness does to a sandbox, in seconds without a call,
// process output or preview request; 0 (or left out) is never.
type Lifecycle struct {
	PauseAfterS     int64 `json:"pause_after_s,omitempty"`
	HibernateAfterS int64 `json:"hibernate_after_s,omitempty"`
	DeleteAfterS    int64 `json:"delete_after_s,omitempty"`
}

// WithLifecycleDefaults gives the lifecycle of the tenant's sandboxes
// whose request leaves a key out (the config's, per deployment and
// tenant).
func WithLifecycleDefaults(def func(tenant string) sandbox.Lifecycle) Option {
	return func(s *Server) { s.lifecycleDefault = def }
}

// lifecycleSpec is the request's lifecycle over the tenant's defaults.
func (s *Server) lifecycleSpec(tenant string, req *Lifecycle) (sandbox.Lifecycle, error) {
	var l sandbox.Lifecycle
	if s.lifecycleDefault != nil {
		l = s.lifecycleDefault(tenant)
	}
	if req == nil {
		return l, nil
	}
	const maxS = 10 * 365 * 24 * 3600
	for _, f := range []struct {
		name string
		v    int64
		d    *time.Duration
	}{{"pause_after_s", req.PauseAfterS, &l.PauseAfter}, {"hibernate_after_s", req.HibernateAfterS, &l.HibernateAfter}, {"delete_after_s", req.DeleteAfterS, &l.DeleteAfter}} {
		switch {
		case f.v < 0 || f.v > maxS:
			return sandbox.Lifecycle{}, errdefs.InvalidArgument("lifecycle.%s is %d; give the idle seconds (1 to %d), or leave it out for the default", f.name, f.v, maxS)
		case f.v > 0:
			*f.d = time.Duration(f.v) * time.Second
		}
	}
	return l, nil
}

func lifecycleOf(info sandbox.Info) *Lifecycle {
	l, err := sandbox.LifecycleOf(info)
	if err != nil || l.IsZero() {
		return nil
	}
	return &Lifecycle{int64(l.PauseAfter / time.Second), int64(l.HibernateAfter / time.Second), int64(l.DeleteAfter / time.Second)}
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.lifecycleVerb(w, r, tenant, Lifecycler.Pause)
}

func (s *Server) hibernateSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.lifecycleVerb(w, r, tenant, Lifecycler.Hibernate)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.lifecycleVerb(w, r, tenant, Lifecycler.Resume)
}

func (s *Server) lifecycleVerb(w http.ResponseWriter, r *http.Request, tenant string, verb func(Lifecycler, context.Context, string, string) (sandbox.Info, error)) error {
	lc, ok := s.sandboxes.(Lifecycler)
	if !ok {
		return errdefs.FailedPrecondition("this sandboxd cannot pause, hibernate or resume sandboxes")
	}
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return err
	}
	got, err := verb(lc, r.Context(), tenant, info.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sandboxOf(got))
	return nil
}
