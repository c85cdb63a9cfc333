package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Egress is the service of network mode "proxy" (package egress/gateway):
// the network part of a sandbox's creation, a sandbox's policy and its
// recent decisions.
type Egress interface {
	// Prepare completes spec's network for tenant (the default mode; a
	// proxy sandbox's own rules and secrets, checked).
	Prepare(tenant string, spec *sandbox.Spec) error
	Network(ctx context.Context, info sandbox.Info) (gateway.Status, error)
	SetNetwork(ctx context.Context, info sandbox.Info, p gateway.Policy) (gateway.Status, error)
	Decisions(ctx context.Context, info sandbox.Info, limit int) ([]gateway.Record, error)
}

var _ Egress = (*gateway.Gateway)(nil)

// WithEgress serves network mode "proxy" from e. Without it a create asking
// for "proxy" is refused, and the network endpoints answer 503.
func WithEgress(e Egress) Option { return func(s *Server) { s.egress = e } }

// Decisions listed by GET /v1/sandboxes/{id}/egress.
const (
	defaultEgressLimit = 100
	maxEgressLimit     = 1000
)

func (s *Server) egressOf(r *http.Request, tenant string) (sandbox.Info, error) {
	if s.egress == nil {
		return sandbox.Info{}, errdefs.Unavailable("this sandboxd serves no egress proxy; a sandbox's network is what it was created with")
	}
	return s.ownSandbox(r, tenant)
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.egressOf(r, tenant)
	if err != nil {
		return err
	}
	st, err := s.egress.Network(r.Context(), info)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) putNetwork(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.egressOf(r, tenant)
	if err != nil {
		return err
	}
	var p gateway.Policy
	if err := decodeJSON(w, r, s.maxBody, &p); err != nil {
		return err
	}
	st, err := s.egress.SetNetwork(r.Context(), info, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) listEgress(w http.ResponseWriter, r *http.Request, tenant string) error {
	limit := defaultEgressLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxEgressLimit {
			return errdefs.InvalidArgument("limit %q is not a number from 1 to %d; give how many recent decisions to list", v, maxEgressLimit)
		}
		limit = n
	}
	info, err := s.egressOf(r, tenant)
	if err != nil {
		return err
	}
	recs, err := s.egress.Decisions(r.Context(), info, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recs)
	return nil
}
