package api

import (
	"time"

	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// The JSON types of API v1 (DESIGN.md §3), shared by the server and the Go
// client so the two cannot drift apart.

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Conversation string            `json:"conversation"`
	Image        string            `json:"image,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Resources    *Resources        `json:"resources,omitempty"`
	// Network is "none" (the default unless the config names another),
	// "bridge" or "proxy" (out only through sandboxd, under a policy).
	Network   string     `json:"network,omitempty"`
	Workspace *Workspace `json:"workspace,omitempty"`
	// Egress narrows the tenant's egress policy for a "proxy" sandbox.
	Egress *EgressRules `json:"egress,omitempty"`
	// Secrets names the tenant's secrets sandboxd adds to a "proxy"
	// sandbox's requests bound for their hosts.
	Secrets []string `json:"secrets,omitempty"`
	// Lifecycle is what idleness does to the sandbox; a key left out takes
	// the tenant's default (config lifecycle).
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// Snapshot makes the sandbox from one of the tenant's snapshots (its
	// files; its image is the snapshot's).
	Snapshot string `json:"snapshot,omitempty"`
	// Runtime is "runc" or "gvisor", among those the tenant may use; left
	// out, the tenant's default.
	Runtime string `json:"runtime,omitempty"`
	// ReadOnlyRoot makes the root file system read-only (the workspace,
	// /tmp and the home directory stay writable); left out, the tenant's
	// default (off).
	ReadOnlyRoot *bool `json:"read_only_root,omitempty"`
	// Expiry and Labels are set by a front end over the same sandboxes
	// (package e2b), never by the JSON API: sandbox.Spec's.
	Expiry sandbox.Expiry    `json:"-"`
	Labels map[string]string `json:"-"`
	// Setuid is sandbox.Spec's: an E2B sandbox's account may use sudo.
	Setuid bool `json:"-"`
	// EgressHeaders are a "proxy" sandbox's own headers
	// (sandbox.EgressSpec.Headers): E2B's network rules.
	EgressHeaders []sandbox.EgressHeader `json:"-"`
}

// EgressRules are allow and deny lists: host names with "*." wildcards and
// an optional ":port", CIDRs for addresses.
type EgressRules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Resources are a sandbox's limits; zero means the backend's default.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
}

// Workspace names a host directory to use as the sandbox's workspace.
type Workspace struct {
	HostPath string `json:"host_path"`
}

// Sandbox is a sandbox as the API reports it.
type Sandbox struct {
	ID           string `json:"id"`
	Conversation string `json:"conversation"`
	Backend      string `json:"backend"`
	Image        string `json:"image"`
	// State is running, paused, hibernated, stopped or gone.
	State string `json:"state"`
	// StateSince is when the sandbox entered State, where it is known.
	StateSince *time.Time `json:"state_since,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	// Lifecycle is what idleness does to the sandbox, as it was created.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// Workspace is the workspace root as tools see it ("/workspace" in a
	// container; a folder for the host backend).
	Workspace string `json:"workspace,omitempty"`
	// Deployment is the sandboxd deployment the sandbox belongs to ("" for
	// one made before deployments and adopted).
	Deployment string `json:"deployment,omitempty"`
	// Network is the sandbox's network mode: none, bridge or proxy.
	Network string `json:"network,omitempty"`
	// Runtime is runc or gvisor.
	Runtime string `json:"runtime,omitempty"`
	// ReadOnlyRoot is set when the root file system is read-only.
	ReadOnlyRoot bool `json:"read_only_root,omitempty"`
}

// CreateRunRequest is the body of POST /v1/runs.
type CreateRunRequest struct {
	Conversation string `json:"conversation"`
	Surface      string `json:"surface,omitempty"`  // default, plan or readonly
	Workdir      string `json:"workdir,omitempty"`  // default /workspace
	Vibe         bool   `json:"vibe,omitempty"`     // background workers
	Space        string `json:"space,omitempty"`    // where questions go
	Approval     string `json:"approval,omitempty"` // auto (default) or ask
	Parent       string `json:"parent,omitempty"`   // the spawning run
}

// Run is the response to POST /v1/runs and GET /v1/runs/{id}.
type Run struct {
	ID           string     `json:"id"`
	Conversation string     `json:"conversation"`
	Surface      string     `json:"surface"`
	Tools        []ToolSpec `json:"tools"`
	// Unavailable lists the tools the run does not see and why (an
	// addition to the contract; left out when every tool is there).
	Unavailable []Unavailable `json:"unavailable,omitempty"`
	Workdir     string        `json:"workdir,omitempty"`
	Space       string        `json:"space,omitempty"`
	Approval    string        `json:"approval,omitempty"`
	Vibe        bool          `json:"vibe,omitempty"`
	Parent      string        `json:"parent,omitempty"`
}

// RunSummary is one run in GET /v1/runs (an addition to the contract).
type RunSummary struct {
	ID           string `json:"id"`
	Conversation string `json:"conversation"`
	Surface      string `json:"surface"`
	Workdir      string `json:"workdir,omitempty"`
	Space        string `json:"space,omitempty"`
	Approval     string `json:"approval,omitempty"`
	Vibe         bool   `json:"vibe,omitempty"`
	Parent       string `json:"parent,omitempty"`
}

// Question is a card on a space (DESIGN.md §3 "Questions").
type Question = questions.Question

// QuestionOption is one numbered option of a Question.
type QuestionOption = questions.Option

// Answer is the body of POST /v1/questions/{id}/answer.
type Answer = questions.Answer

// Resolution is the data of a `resolved` event on a space's stream.
type Resolution = questions.Resolution

// ToolSpec is a tool definition ready to hand to a model.
type ToolSpec = tools.Spec

// Unavailable is a group of tools a run does not see: what is missing and
// what would bring them in.
type Unavailable = tools.Unavailable

// ToolResult is the result of a tool call.
type ToolResult = tools.Result

// Block is one piece of a ToolResult.
type Block = tools.Block

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a wire code (errdefs class) and a one-sentence message
// for a person.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Status is the body of /healthz and /readyz.
type Status struct {
	Status string `json:"status"`
}

// Header names.
const (
	HeaderRequestID = "X-Request-Id"
)

// Defaults applied to requests that leave a field out.
const (
	DefaultWorkdir  = "/workspace"
	ApprovalAuto    = "auto"
	ApprovalAsk     = "ask"
	DefaultNetwork  = "none"
	AdminTenantName = "admin"
)
