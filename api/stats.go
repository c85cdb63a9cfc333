package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// statser is an optional capability of Sandboxes: a sandbox's resource use
// as the engine reports it; a backend that cannot say returns an error
// that is sandbox.ErrNoStats.
type statser interface {
	Stats(ctx context.Context, tenant, id string) (sandbox.Stats, error)
}

var _ statser = (*sandbox.Manager)(nil)

// statsTimeout bounds one reading: the engine samples CPU over about a
// second, and a hung engine must not hold the console's refresh.
const statsTimeout = 10 * time.Second

// SandboxStats is the response to GET /v1/sandboxes/{id}/stats. Available is
// false (with Reason) where the backend or the sandbox's state gives no
// figures; the figures are then left out.
type SandboxStats struct {
	ID               string     `json:"id"`
	State            string     `json:"state"`
	Available        bool       `json:"available"`
	Reason           string     `json:"reason,omitempty"`
	CPUPercent       float64    `json:"cpu_percent"`
	MemoryBytes      uint64     `json:"memory_bytes"`
	MemoryLimitBytes uint64     `json:"memory_limit_bytes,omitempty"`
	Pids             uint64     `json:"pids"`
	ReadAt           *time.Time `json:"read_at,omitempty"`
}

func (s *Server) sandboxStats(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return err
	}
	out := SandboxStats{ID: info.ID, State: info.State}
	st, ok := s.sandboxes.(statser)
	switch {
	case !ok:
		out.Reason = "this sandboxd's sandbox manager reports no resource use"
	case info.State != sandbox.StateRunning:
		out.Reason = "the sandbox is " + info.State + ", so it uses nothing to report"
	default:
		ctx, cancel := context.WithTimeout(r.Context(), statsTimeout)
		defer cancel()
		got, err := st.Stats(ctx, tenant, info.ID)
		switch {
		case errors.Is(err, sandbox.ErrNoStats):
			out.Reason = err.Error()
		case errors.Is(err, errdefs.ErrNotFound):
			return errdefs.NotFound("sandbox %q does not exist; list your sandboxes with GET /v1/sandboxes", info.ID)
		case err != nil:
			return err
		default:
			at := got.ReadAt.UTC()
			out.Available = true
			out.CPUPercent, out.MemoryBytes, out.MemoryLimitBytes, out.Pids = got.CPUPercent, got.MemoryBytes, got.MemoryLimitBytes, got.Pids
			out.ReadAt = &at
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
