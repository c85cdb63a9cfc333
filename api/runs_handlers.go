package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/audit"
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
	sb, err := s.lookup(r.Context(), run)
	if err != nil {
		return err
	}
	if err := checkWorkdir(run, sb); err != nil {
		return err
	}
	run, err = s.runs.Create(r.Context(), run)
	if err != nil {
		return err
	}
	env := s.envOf(r.Context(), run, sb)
	if s.obs != nil {
		s.obs.RunCreated()
	}
	writeJSON(w, http.StatusCreated, s.runAnswer(run, env))
	return nil
}

// getRun serves GET /v1/runs/{id}: the run as POST /v1/runs returned it,
// with the tool list and what is absent as they stand now.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, tenant string) error {
	run, env, err := s.pathRunEnv(r, tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runAnswer(run, env))
	return nil
}

// runAnswer is a run with the tools it sees, and those it does not and why.
func (s *Server) runAnswer(run tools.Run, env *tools.Env) Run {
	return Run{
		ID:           run.ID,
		Conversation: run.Conversation,
		Surface:      run.Surface,
		Tools:        nonNil(s.tools.Visible(env)),
		Unavailable:  s.tools.Unavailable(env),
		Workdir:      run.Workdir,
		Space:        run.Space,
		Approval:     run.Approval,
		Vibe:         run.Vibe,
		Parent:       run.Parent,
	}
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
	if run.Space != "" {
		if err := sandbox.ValidateConversation(run.Space); err != nil {
			return tools.Run{}, errdefs.InvalidArgument("space %q is invalid: use 1 to %d letters, digits, '.', '_', ':' or '-', starting with a letter or digit",
				run.Space, sandbox.MaxConversationLen)
		}
	}
	// The gate puts every write and exec call of an "ask" run to the run's
	// space; without one each of them would be refused at call time, after
	// the run looked fine.
	if run.Approval == ApprovalAsk && run.Space == "" {
		return tools.Run{}, errdefs.InvalidArgument("approval \"ask\" needs a space: every write or exec call asks there for permission; add \"space\": \"<name>\" (people answer in the web console at /ui/) or use approval \"auto\"")
	}
	wd, err := workdirOf(run.Workdir)
	if err != nil {
		return tools.Run{}, err
	}
	run.Workdir = wd
	return run, nil
}

// workdirOf cleans a requested workdir: "" is the workspace root and a
// relative one is taken from it ("src" is /workspace/src).
func workdirOf(wd string) (string, error) {
	switch {
	case strings.ContainsRune(wd, 0):
		return "", errdefs.InvalidArgument("workdir %q contains a NUL byte; use the workspace root %q or a directory under it", wd, DefaultWorkdir)
	case wd == "":
		return DefaultWorkdir, nil
	case !path.IsAbs(wd):
		return path.Join(DefaultWorkdir, wd), nil
	case path.Clean(wd) != wd:
		return "", errdefs.InvalidArgument("workdir %q is not a clean absolute path; use the workspace root %q or a directory under it", wd, DefaultWorkdir)
	}
	return wd, nil
}

// checkWorkdir refuses a workdir outside the workspace. With a sandbox,
// that is "/workspace" (as tools see it) or the sandbox's own workspace
// root (a host folder on the host backend); a conversation without one yet
// has only the documented "/workspace", which maps onto whatever workspace
// its sandbox gets.
func checkWorkdir(run tools.Run, sb *sandbox.Info) error {
	wd := run.Workdir
	if within(wd, DefaultWorkdir) || sb != nil && sb.Workspace != "" && within(wd, sb.Workspace) {
		return nil
	}
	switch {
	case sb == nil:
		return errdefs.InvalidArgument("workdir %q is outside the workspace: conversation %q has no sandbox yet, and its workspace will be %q; use %q or a directory under it (a relative workdir is taken from there)",
			wd, run.Conversation, DefaultWorkdir, DefaultWorkdir)
	case sb.Workspace != "" && sb.Workspace != DefaultWorkdir:
		return errdefs.InvalidArgument("workdir %q is outside the sandbox's workspace; use %q (here %q) or a directory under it (a relative workdir is taken from there)",
			wd, DefaultWorkdir, sb.Workspace)
	}
	return errdefs.InvalidArgument("workdir %q is outside the sandbox's workspace; use %q or a directory under it (a relative workdir is taken from there)", wd, DefaultWorkdir)
}

// within reports whether the clean absolute path p is root or lies under it.
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, tenant string) error {
	specs, err := s.runTools(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, specs)
	return nil
}

// runTools lists the tools the tenant's run sees now: GET
// /v1/runs/{id}/tools and the MCP endpoint's tools/list.
func (s *Server) runTools(ctx context.Context, tenant, id string) ([]tools.Spec, error) {
	run, err := s.runs.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	env, err := s.env(ctx, run)
	if err != nil {
		return nil, err
	}
	return nonNil(s.tools.Visible(env)), nil
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request, tenant string) error {
	run, err := s.runs.Get(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	body, err := readBody(w, r, s.maxTool)
	if err != nil {
		return err
	}
	env, args, err := s.prepareCall(r.Context(), run, body)
	if err != nil {
		return err
	}
	if wantsStream(r) {
		return s.streamCall(w, r, env, r.PathValue("name"), args)
	}
	res, err := s.tools.Call(r.Context(), env, r.PathValue("name"), args)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, normalized(res))
	return nil
}

// runCall calls a tool of the tenant's run as POST
// /v1/runs/{id}/tools/{name} does without a stream: the MCP endpoint's
// tools/call.
func (s *Server) runCall(ctx context.Context, tenant, id, name string, body json.RawMessage) (tools.Result, error) {
	run, err := s.runs.Get(ctx, tenant, id)
	if err != nil {
		return tools.Result{}, err
	}
	env, args, err := s.prepareCall(ctx, run, body)
	if err != nil {
		return tools.Result{}, err
	}
	res, err := s.tools.Call(ctx, env, name, args)
	return normalized(res), err
}

// prepareCall checks a call's arguments and builds the environment its
// tool sees (the env hooks complete it: diagnostics on write and the
// like); the registry then applies levels, the approval gate and the
// schema. An empty body means no arguments; anything else must be one
// object.
func (s *Server) prepareCall(ctx context.Context, run tools.Run, body []byte) (*tools.Env, json.RawMessage, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	} else if err := checkObject(body); err != nil {
		return nil, nil, err
	}
	env, err := s.env(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	return env, body, nil
}

// listRuns lists the tenant's live runs (without their tool lists, which
// would need every conversation's sandbox looked up).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, tenant string) error {
	out := []RunSummary{}
	for _, run := range s.runs.List(r.Context(), tenant) {
		out = append(out, RunSummary{
			ID: run.ID, Conversation: run.Conversation, Surface: run.Surface, Workdir: run.Workdir,
			Space: run.Space, Approval: run.Approval, Vibe: run.Vibe, Parent: run.Parent,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request, tenant string) error {
	if err := s.runs.Delete(r.Context(), tenant, r.PathValue("id")); err != nil {
		return err
	}
	s.mcp.DropRun(r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pathRunEnv finds the tenant's run named by the path and the environment
// its tools see now.
func (s *Server) pathRunEnv(r *http.Request, tenant string) (tools.Run, *tools.Env, error) {
	run, err := s.runs.Get(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return tools.Run{}, nil, err
	}
	env, err := s.env(r.Context(), run)
	return run, env, err
}

// env builds what the registry sees of a run: whether its conversation has
// a sandbox (looked up once, never created) and how to reach it.
func (s *Server) env(ctx context.Context, run tools.Run) (*tools.Env, error) {
	sb, err := s.lookup(ctx, run)
	if err != nil {
		return nil, err
	}
	return s.envOf(ctx, run, sb), nil
}

// lookup returns the run's conversation's sandbox, or nil when it has none.
func (s *Server) lookup(ctx context.Context, run tools.Run) (*sandbox.Info, error) {
	info, err := s.sandboxes.Lookup(ctx, run.Tenant, run.Conversation)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case info.Tenant != run.Tenant:
		return nil, nil
	}
	return &info, nil
}

// envOf is env for a sandbox already looked up (nil: none). The one lookup
// is passed down: the workdir is mapped onto the sandbox's workspace here
// (tools.Workdir), and the tools' accessor opens the pipe of that sandbox
// without checking the tenant again. A conversation whose sandbox was
// replaced since the lookup gets the "gone" error message; its next call finds
// the new one.
func (s *Server) envOf(ctx context.Context, run tools.Run, sb *sandbox.Info) *tools.Env {
	if sb != nil {
		run.Workdir = tools.Workdir(sb.Workspace, run.Workdir)
		audit.RequestFrom(ctx).SetRun(run.ID, run.Conversation, sb.ID)
	} else {
		audit.RequestFrom(ctx).SetRun(run.ID, run.Conversation, "")
	}
	tenant, conv := run.Tenant, run.Conversation
	env := &tools.Env{
		Run:        &run,
		HasSandbox: sb != nil,
		Sandbox: func(ctx context.Context) (*tools.SandboxConn, error) {
			if sb == nil {
				return nil, errdefs.NotFound("conversation %q has no sandbox; create one with POST /v1/sandboxes", conv)
			}
			var c *agent.Client
			var info sandbox.Info
			var err error
			if by, ok := s.sandboxes.(agentOf); ok {
				c, info, err = by.AgentOf(ctx, *sb)
			} else {
				c, info, err = s.sandboxes.Agent(ctx, tenant, conv)
			}
			if err != nil {
				return nil, err
			}
			if info.ID != sb.ID {
				return nil, errdefs.NotFound("the sandbox %s of conversation %q is gone (it was replaced as this call started); call again to use the conversation's current sandbox", sb.ID, conv)
			}
			return &tools.SandboxConn{ID: info.ID, Backend: info.Backend, Workspace: info.Workspace, Agent: c}, nil
		},
	}
	for _, h := range s.envHooks {
		h(ctx, env)
	}
	return env
}

func nonNil(specs []tools.Spec) []tools.Spec {
	if specs == nil {
		return []tools.Spec{}
	}
	return specs
}
