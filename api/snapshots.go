package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Snapshots of a sandbox's files and forks into new sandboxes (package
// sandbox, Snapshotter).

// Snapshotter is an optional capability of Sandboxes (sandbox.Manager).
type Snapshotter interface {
	Snapshot(ctx context.Context, tenant, id, name string) (sandbox.Snapshot, error)
	Snapshots(ctx context.Context, tenant string) ([]sandbox.Snapshot, error)
	GetSnapshot(ctx context.Context, tenant, snapID string) (sandbox.Snapshot, error)
	DeleteSnapshot(ctx context.Context, tenant, snapID string) error
	Fork(ctx context.Context, tenant, id string, conversations []string) (sandbox.Snapshot, []sandbox.Info, []sandbox.ForkFailure, error)
}

var _ Snapshotter = (*sandbox.Manager)(nil)

// SnapshotNote is said once in every snapshot: what it does not hold.
const SnapshotNote = "processes and memory (kernels, servers, their variables) are not part of a snapshot: memory checkpointing does not work on this machine's kernel; a sandbox made from it starts them anew"

// CreateSnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshots.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// Snapshot is a snapshot as the API reports it.
type Snapshot struct {
	ID           string    `json:"id"`
	Sandbox      string    `json:"sandbox"`
	Conversation string    `json:"conversation,omitempty"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at"`
	SizeBytes    int64     `json:"size_bytes"`
	// Holds is what it holds: "filesystem and workspace" (the sandbox's own
	// file system changes, e.g. installed packages, and its workspace), or
	// "workspace" where the engine cannot commit a file system.
	Holds string `json:"holds"`
	// Note says what no snapshot holds.
	Note string `json:"note"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork.
type ForkRequest struct {
	Conversations []string `json:"conversations"`
}

// ForkResponse is the answer to a fork: the snapshot the copies started
// from, the sandboxes made, and the copies that failed, each with why.
type ForkResponse struct {
	Snapshot  Snapshot      `json:"snapshot"`
	Sandboxes []Sandbox     `json:"sandboxes"`
	Failed    []ForkFailure `json:"failed,omitempty"`
}

// ForkFailure is one copy a fork could not make.
type ForkFailure struct {
	Conversation string      `json:"conversation"`
	Error        ErrorDetail `json:"error"`
}

func snapshotOf(s sandbox.Snapshot) Snapshot {
	return Snapshot{ID: s.ID, Sandbox: s.Sandbox, Conversation: s.Conversation, Name: s.Name, CreatedAt: s.CreatedAt.UTC(),
		SizeBytes: s.SizeBytes, Holds: s.Holds, Note: SnapshotNote}
}

func (s *Server) snapshots() (Snapshotter, error) {
	sn, ok := s.sandboxes.(Snapshotter)
	if !ok {
		return nil, errdefs.FailedPrecondition("this sandboxd takes no snapshots")
	}
	return sn, nil
}

// snapshotTarget is what a snapshot or a fork of the sandbox in the path
// starts from: it decodes the body into req, then checks that this sandboxd
// takes snapshots and that the tenant owns the sandbox, in that order (a
// bad body is reported first), and returns the snapshotter and the
// sandbox's id.
func (s *Server) snapshotTarget(w http.ResponseWriter, r *http.Request, tenant string, req any) (Snapshotter, string, error) {
	if err := decodeJSON(w, r, s.maxBody, req); err != nil {
		return nil, "", err
	}
	sn, err := s.snapshots()
	if err != nil {
		return nil, "", err
	}
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return nil, "", err
	}
	return sn, info.ID, nil
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req CreateSnapshotRequest
	sn, id, err := s.snapshotTarget(w, r, tenant, &req)
	if err != nil {
		return err
	}
	snap, err := sn.Snapshot(r.Context(), tenant, id, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshotOf(snap))
	return nil
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, tenant string) error {
	sn, err := s.snapshots()
	if err != nil {
		return err
	}
	all, err := sn.Snapshots(r.Context(), tenant)
	if err != nil {
		return err
	}
	out := []Snapshot{}
	for _, x := range all {
		out = append(out, snapshotOf(x))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request, tenant string) error {
	sn, err := s.snapshots()
	if err != nil {
		return err
	}
	snap, err := sn.GetSnapshot(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snapshotOf(snap))
	return nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request, tenant string) error {
	sn, err := s.snapshots()
	if err != nil {
		return err
	}
	if err := sn.DeleteSnapshot(r.Context(), tenant, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req ForkRequest
	sn, id, err := s.snapshotTarget(w, r, tenant, &req)
	if err != nil {
		return err
	}
	snap, made, failed, err := sn.Fork(r.Context(), tenant, id, req.Conversations)
	if err != nil {
		return err
	}
	resp := ForkResponse{Snapshot: snapshotOf(snap), Sandboxes: []Sandbox{}}
	for _, m := range made {
		resp.Sandboxes = append(resp.Sandboxes, sandboxOf(m))
	}
	var why []string
	for _, f := range failed {
		resp.Failed = append(resp.Failed, ForkFailure{Conversation: f.Conversation, Error: ErrorDetail{Code: errdefs.Code(f.Err), Message: f.Err.Error()}})
		why = append(why, f.Conversation+": "+f.Err.Error())
	}
	if len(made) == 0 {
		// Nothing was made: the first copy's error class, every copy's reason.
		return classOf(failed[0].Err, "no copy could be made ("+strings.Join(why, "; ")+"); nothing was kept")
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// classOf is an error of err's class with message msg.
func classOf(err error, msg string) error {
	switch {
	case errors.Is(err, errdefs.ErrConflict):
		return errdefs.Conflict("%s", msg)
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return errdefs.InvalidArgument("%s", msg)
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return errdefs.ResourceExhausted("%s", msg)
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return errdefs.FailedPrecondition("%s", msg)
	}
	return errdefs.Unavailable("%s", msg)
}
