package api

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

func (s *Server) createRun(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req CreateRunRequest
	if err := decodeJSON(w, r, s.maxBody, &req); err != nil {
		return err
	}
	run, err := runOf(tenant, req)
	if err != nil {
		return err
	}
	run, err = s.runs.Create(run)
	if err != nil {
		return err
	}
	env, err := s.env(r.Context(), run)
	if err != nil {
		// The run is useless without its tool list; do not leave it behind.
		s.runs.Delete(tenant, run.ID)
		return err
	}
	if s.obs != nil {
		s.obs.RunCreated()
	}
	writeJSON(w, http.StatusCreated, Run{
		ID:           run.ID,
		Conversation: run.Conversation,
		Surface:      run.Surface,
		Tools:        nonNil(s.tools.Visible(env)),
		Workdir:      run.Workdir,
		Space:        run.Space,
		Approval:     run.Approval,
		Vibe:         run.Vibe,
		Parent:       run.Parent,
	})
	return nil
}

// runOf validates a run request and fills in the defaults.
func runOf(tenant string, req CreateRunRequest) (tools.Run, error) {
	if err := sandbox.ValidateConversation(req.Conversation); err != nil {
		return tools.Run{}, err
	}
	run := tools.Run{
		Tenant:       tenant,
		Conversation: req.Conversation,
		Surface:      req.Surface,
		Workdir:      req.Workdir,
		Space:        req.Space,
		Approval:     req.Approval,
		Vibe:         req.Vibe,
		Parent:       req.Parent,
	}
	switch run.Surface {
	case "":
		run.Surface = tools.SurfaceDefault
	case tools.SurfaceDefault, tools.SurfacePlan, tools.SurfaceReadonly:
	default:
		return tools.Run{}, errdefs.InvalidArgument("surface %q is not known; use \"default\", \"plan\" or \"readonly\"", run.Surface)
	}
	switch run.Approval {
	case "":
		run.Approval = ApprovalAuto
	case ApprovalAuto, ApprovalAsk:
	default:
		return tools.Run{}, errdefs.InvalidArgument("approval %q is not known; use \"auto\" or \"ask\"", run.Approval)
	}
	if run.Workdir == "" {
		run.Workdir = DefaultWorkdir
	}
	if !path.IsAbs(run.Workdir) || path.Clean(run.Workdir) != run.Workdir || strings.ContainsRune(run.Workdir, 0) {
		return tools.Run{}, errdefs.InvalidArgument("workdir %q is not a clean absolute path; use the workspace root %q or a directory under it", run.Workdir, DefaultWorkdir)
	}
	if run.Space != "" {
		if err := sandbox.ValidateConversation(run.Space); err != nil {
			return tools.Run{}, errdefs.InvalidArgument("space %q is invalid: use 1 to %d letters, digits, '.', '_', ':' or '-', starting with a letter or digit",
				run.Space, sandbox.MaxConversationLen)
		}
	}
	return run, nil
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, tenant string) error {
	run, err := s.runs.Get(tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	env, err := s.env(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nonNil(s.tools.Visible(env)))
	return nil
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request, tenant string) error {
	run, err := s.runs.Get(tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	body, err := readBody(w, r, s.maxTool)
	if err != nil {
		return err
	}
	// An empty body means no arguments; anything else must be one object.
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	} else if err := checkObject(body); err != nil {
		return err
	}
	env, err := s.env(r.Context(), run)
	if err != nil {
		return err
	}
	res, err := s.tools.Call(r.Context(), env, r.PathValue("name"), body)
	if err != nil {
		return err
	}
	if res.Content == nil {
		res.Content = []tools.Block{}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// listRuns lists the tenant's live runs (without their tool lists, which
// would need every conversation's sandbox looked up).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, tenant string) error {
	out := []RunSummary{}
	for _, run := range s.runs.List(tenant) {
		out = append(out, RunSummary{
			ID: run.ID, Conversation: run.Conversation, Surface: run.Surface, Workdir: run.Workdir,
			Space: run.Space, Approval: run.Approval, Vibe: run.Vibe, Parent: run.Parent,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request, tenant string) error {
	if err := s.runs.Delete(tenant, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// env builds what the registry sees of a run: whether its conversation has
// a sandbox (found, never created) and how to reach it.
func (s *Server) env(ctx context.Context, run tools.Run) (*tools.Env, error) {
	info, err := s.sandboxes.Lookup(ctx, run.Tenant, run.Conversation)
	has := err == nil && info.Tenant == run.Tenant
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	if has {
		run.Workdir = resolveWorkdir(run.Workdir, info.Workspace)
	}
	tenant, conv := run.Tenant, run.Conversation
	env := &tools.Env{
		Run:        &run,
		HasSandbox: has,
		Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
			c, info, err := s.sandboxes.Agent(ctx, tenant, conv)
			if err != nil {
				return nil, err
			}
			if info.Tenant != tenant {
				return nil, errdefs.NotFound("conversation %q has no sandbox; create one with POST /v1/sandboxes", conv)
			}
			return &tools.SandboxConn{ID: info.ID, Backend: info.Backend, Workspace: info.Workspace, Agent: c}, nil
		},
	}
	for _, h := range s.envHooks {
		h(ctx, env)
	}
	return env, nil
}

// resolveWorkdir maps the documented /workspace onto where the sandbox's
// workspace really is (a host folder for the host backend).
func resolveWorkdir(workdir, workspace string) string {
	if workspace == "" || workspace == DefaultWorkdir {
		return workdir
	}
	if workdir == "" || workdir == DefaultWorkdir {
		return workspace
	}
	if rest, ok := strings.CutPrefix(workdir, DefaultWorkdir+"/"); ok {
		return path.Join(workspace, rest)
	}
	return workdir
}

func nonNil(specs []tools.Spec) []tools.Spec {
	if specs == nil {
		return []tools.Spec{}
	}
	return specs
}
