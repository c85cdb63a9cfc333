package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req CreateSandboxRequest
	if err := decodeJSON(w, r, s.maxBody, &req); err != nil {
		return err
	}
	info, err := s.CreateSandbox(r.Context(), tenant, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sandboxOf(info))
	return nil
}

// CreateSandbox makes the tenant's sandbox as POST /v1/sandboxes does (the
// default image, network and lifecycle, the egress checks), for front ends
// that speak another API over the same sandboxes (package e2b).
func (s *Server) CreateSandbox(ctx context.Context, tenant string, req CreateSandboxRequest) (sandbox.Info, error) {
	if err := sandbox.ValidateConversation(req.Conversation); err != nil {
		return sandbox.Info{}, err
	}
	spec := sandbox.Spec{
		Tenant:       tenant,
		Conversation: req.Conversation,
		Image:        req.Image,
		Env:          req.Env,
		Network:      req.Network,
		Snapshot:     req.Snapshot,
		Expiry:       req.Expiry,
		Labels:       req.Labels,
		Setuid:       req.Setuid,
	}
	if spec.Image == "" && spec.Snapshot == "" {
		spec.Image = s.image
	}
	if spec.Snapshot != "" && req.Image != "" {
		return sandbox.Info{}, errdefs.InvalidArgument("give an image or a snapshot, not both: a sandbox made from a snapshot runs the snapshot's image")
	}
	if req.Egress != nil || len(req.Secrets) > 0 || len(req.EgressHeaders) > 0 {
		spec.Egress = &sandbox.EgressSpec{Secrets: req.Secrets, Headers: req.EgressHeaders}
		if req.Egress != nil {
			spec.Egress.Allow, spec.Egress.Deny = req.Egress.Allow, req.Egress.Deny
		}
	}
	switch spec.Network {
	case "", "none", "bridge", sandbox.NetworkProxy:
	default:
		return sandbox.Info{}, errdefs.InvalidArgument("network %q is not supported; use \"none\" (the default), \"bridge\" or \"proxy\"", spec.Network)
	}
	if s.egress != nil {
		if err := s.egress.Prepare(tenant, &spec); err != nil {
			return sandbox.Info{}, err
		}
	} else {
		if spec.Network == "" {
			spec.Network = DefaultNetwork
		}
		if spec.Network == sandbox.NetworkProxy || spec.Egress != nil {
			return sandbox.Info{}, errdefs.FailedPrecondition("this sandboxd serves no egress proxy, so network \"proxy\", egress rules and secrets are not available; use \"none\" or \"bridge\"")
		}
	}
	if err := s.runtimeSpec(tenant, req, &spec); err != nil {
		return sandbox.Info{}, err
	}
	var err error
	if spec.Lifecycle, err = s.lifecycleSpec(tenant, req.Lifecycle); err != nil {
		return sandbox.Info{}, err
	}
	if req.Resources != nil {
		spec.Resources = sandbox.Resources{CPUs: req.Resources.CPUs, MemoryMB: req.Resources.MemoryMB, Pids: req.Resources.Pids}
		if spec.Resources.CPUs < 0 || spec.Resources.MemoryMB < 0 || spec.Resources.Pids < 0 {
			return sandbox.Info{}, errdefs.InvalidArgument("resources must not be negative; leave a field out (or 0) for the default")
		}
	}
	if req.Workspace != nil {
		if req.Workspace.HostPath == "" {
			return sandbox.Info{}, errdefs.InvalidArgument("workspace.host_path is empty; give an absolute host directory, or leave workspace out")
		}
		p, err := s.hostPaths.Check(tenant, req.Workspace.HostPath)
		if err != nil {
			return sandbox.Info{}, err
		}
		spec.HostWorkspace = p
	}
	info, err := s.sandboxes.Create(ctx, spec)
	if err == nil {
		// The request's audit record names the sandbox it made, as the
		// records of later requests on it do: asking for the sandbox's
		// records finds who made it.
		audit.RequestFrom(ctx).SetRun("", info.Conversation, info.ID)
	}
	return info, err
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request, tenant string) error {
	conv := r.URL.Query().Get("conversation")
	if conv != "" {
		if err := sandbox.ValidateConversation(conv); err != nil {
			return err
		}
	}
	infos, err := s.sandboxes.List(r.Context(), tenant, conv)
	if err != nil {
		return err
	}
	out := []Sandbox{}
	for _, info := range infos {
		if info.Tenant == tenant && (conv == "" || info.Conversation == conv) {
			out = append(out, sandboxOf(info))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sandboxOf(info))
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := s.ownSandbox(r, tenant)
	if err != nil {
		return err
	}
	if err := s.sandboxes.Delete(r.Context(), tenant, info.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ownSandbox returns the sandbox named in the path when it is the tenant's;
// anything else is the same NotFound, so existence is not revealed.
func (s *Server) ownSandbox(r *http.Request, tenant string) (sandbox.Info, error) {
	id := r.PathValue("id")
	info, err := s.sandboxes.Get(r.Context(), tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && info.Tenant != tenant) {
		return sandbox.Info{}, errdefs.NotFound("sandbox %q does not exist; list your sandboxes with GET /v1/sandboxes", id)
	}
	return info, err
}

func sandboxOf(info sandbox.Info) Sandbox {
	var since *time.Time
	if !info.StateSince.IsZero() {
		t := info.StateSince.UTC()
		since = &t
	}
	return Sandbox{
		StateSince:   since,
		Lifecycle:    lifecycleOf(info),
		ID:           info.ID,
		Conversation: info.Conversation,
		Backend:      info.Backend,
		Image:        info.Image,
		State:        info.State,
		CreatedAt:    info.CreatedAt.UTC(),
		Workspace:    info.Workspace,
		Network:      sandbox.NetworkOf(info),
		Runtime:      sandbox.RuntimeOf(info),
		ReadOnlyRoot: sandbox.ReadOnlyRootOf(info),
		Deployment:   info.Deployment,
	}
}
