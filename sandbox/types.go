// Package sandbox maps conversations to sandboxes. The map lives in the
// backend's own labels, so a restarted sandboxd finds every sandbox again;
// the Manager keeps one agent pipe per sandbox and reaps idle ones.
// Backends (sandbox/docker, sandbox/host, ...) only create, find, remove and
// exec into sandboxes.
package sandbox

import (
	"context"
	"io"
	"time"
)

// Label keys every backend stores on its sandboxes.
const (
	LabelManaged      = "io.sandboxd.managed"      // "true"
	LabelTenant       = "io.sandboxd.tenant"       // tenant name
	LabelConversation = "io.sandboxd.conversation" // conversation id
	LabelCreatedAt    = "io.sandboxd.created-at"   // RFC 3339
	LabelDeployment   = "io.sandboxd.deployment"   // the Deployment's Name
	// LabelPool marks a sandbox made for a warm pool: the pool's key
	// (PoolKey). Until it is claimed it has no tenant or conversation, so
	// the Manager's map skips it; the label stays after a claim.
	LabelPool = "io.sandboxd.pool"
	// LabelNetwork is the network mode the sandbox was made with ("none",
	// "bridge" or "proxy"); a sandbox made before the label is "none" or
	// whatever its engine says.
	LabelNetwork = "io.sandboxd.network"
	// LabelEgress holds a "proxy" sandbox's own egress policy and the
	// names of the secrets it may use, as JSON (EgressSpec); on Kubernetes
	// it is an annotation.
	LabelEgress = "io.sandboxd.egress"
	// LabelEgressChange holds a "proxy" sandbox's own egress lists as last
	// changed through the API, as JSON, where the backend can change a
	// sandbox's labels after creation (Annotator).
	LabelEgressChange = "io.sandboxd.egress-change"
)

// States of a sandbox as reported by the API.
const (
	StateRunning = "running"
	StateStopped = "stopped" // exists but not running: tools report that it is not running
	StatePaused  = "paused"  // frozen by the engine (docker pause): tools report it until it is unpaused
	StateGone    = "gone"
)

// Resources are the limits requested for a sandbox; zero means the default.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
}

// Spec is what Create needs.
type Spec struct {
	Tenant       string
	Conversation string
	Image        string
	Env          map[string]string
	Resources    Resources
	Network      string // "none" (default), "bridge" or "proxy"
	// Egress is a "proxy" sandbox's own policy and secrets; nil for the
	// other modes.
	Egress *EgressSpec
	// HostWorkspace, when set, is a host directory used as the workspace
	// (bind-mounted by Docker, used in place by the host backend). Callers
	// have already checked it against the allowed host paths.
	HostWorkspace string
	// Snapshot, when set, makes the sandbox from that snapshot's files
	// (Snapshotter); Image is then the snapshot's.
	Snapshot string
	// Lifecycle is what idleness does to the sandbox (LabelLifecycle);
	// zero leaves it to the manager's default.
	Lifecycle Lifecycle
	// Pool, when set, makes a warm-pool sandbox: the backend stamps it in
	// LabelPool, and Tenant and Conversation are empty until Claim.
	Pool string
	// Expiry is a step taken at a set time (LabelExpiry); zero: none.
	Expiry Expiry
	// Labels are a front end's own labels (keys under LabelExtPrefix, each
	// at most MaxLabelBytes), stamped at creation and kept by a fork's
	// copies; on Kubernetes they are annotations.
	Labels map[string]string
	// Setuid lets the sandbox's processes gain privileges through
	// set-user-ID programs (sudo from an account that is not root), which
	// sandboxes are otherwise made without (no-new-privileges). The
	// capabilities stay the ones root has in every sandbox: it lets an
	// account become the sandbox's root, nothing more. Stamped
	// (LabelSetuid) and kept by a fork's copies.
	Setuid bool
	// Runtime is RuntimeRunc ("" too) or RuntimeGVisor, stamped
	// (LabelRuntime) and kept by a fork's copies.
	Runtime string
	// ReadOnlyRoot makes the root file system read-only, the workspace,
	// /tmp and the home directory staying writable (LabelReadOnlyRoot).
	ReadOnlyRoot bool
}

// LabelSetuid marks a sandbox made with Spec.Setuid.
const LabelSetuid = "io.sandboxd.setuid"

// SetuidLabels are the labels a backend stamps for spec.Setuid.
func SetuidLabels(spec Spec) map[string]string {
	if !spec.Setuid {
		return nil
	}
	return map[string]string{LabelSetuid: "true"}
}

// SetuidOf reports whether info's sandbox was made with Spec.Setuid.
func SetuidOf(info Info) bool { return info.Labels[LabelSetuid] == "true" }

// Owner is whom a claimed pool sandbox belongs to.
type Owner struct {
	Tenant       string
	Conversation string
	// Labels are what a create would have stamped beyond the owner: the
	// expiry and a front end's own labels (ClaimLabels).
	Labels map[string]string
}

// Info describes one sandbox.
type Info struct {
	ID           string
	Tenant       string
	Conversation string
	Deployment   string // LabelDeployment; "" for a sandbox made before deployments
	Backend      string
	Image        string
	State        string
	// StateSince is when the sandbox entered State, where the engine or
	// sandboxd knows it (zero otherwise).
	StateSince time.Time
	CreatedAt  time.Time
	Workspace  string // absolute workspace root as the agent sees it
	Labels     map[string]string
	// Started is when the engine last started the sandbox's main process,
	// where it says (zero otherwise). A later value than the one read when
	// a pipe was opened means the sandbox restarted under that pipe, whose
	// other end is gone with the processes it had.
	Started time.Time
	// Restarting says the sandbox stopped and its engine is starting it
	// again by its restart policy (its main process died).
	Restarting bool
}

// Backend creates, finds, removes and execs into sandboxes.
//
// A backend works for one Deployment: Create stamps its name on every
// sandbox, and List, Inspect, Remove and AttachAgent see only the sandboxes
// it Owns; another deployment's are NotFound, as if they did not exist.
type Backend interface {
	Name() string
	// Deployment is the deployment the backend works for.
	Deployment() Deployment
	Create(ctx context.Context, spec Spec) (Info, error)
	// List returns every sandbox of the deployment that carries
	// LabelManaged, in any state.
	List(ctx context.Context) ([]Info, error)
	// Inspect returns one sandbox of the deployment; errdefs.ErrNotFound
	// when it is gone or another deployment's.
	Inspect(ctx context.Context, id string) (Info, error)
	// Remove stops and removes the sandbox and everything running in it.
	Remove(ctx context.Context, id string) error
	// AttachAgent runs `sandbox-agent attach` inside the sandbox and returns
	// its stdio as one byte stream. Closing it ends the exec, not the agent.
	AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error)
}

// Annotator is an optional Backend capability: a label (an annotation on
// Kubernetes) set on a sandbox after creation, which List and Inspect
// report from then on, to every replica and after a restart. Docker cannot
// change a container's labels, so it has none.
type Annotator interface {
	Annotate(ctx context.Context, id, key, value string) error
}

// ResumeHinter is an optional Backend capability: the command that unpauses
// a paused sandbox, for the error message that says it is paused.
type ResumeHinter interface {
	ResumeHint(info Info) string
}

// UnlabelledCounter is an optional Backend capability: how many sandboxes
// carry LabelManaged but no LabelDeployment (made by a sandboxd from before
// deployments), so that a deployment that leaves them alone can say so.
type UnlabelledCounter interface {
	Unlabelled(ctx context.Context) (int, error)
}

// Claimer is an optional Backend capability, the one warm pools need: it
// hands the unclaimed pool sandbox warm (as Create returned it: Spec.Pool
// set, no tenant) to owner. From its return on, List and Inspect report the
// sandbox with owner's tenant and conversation, to every replica and after a
// restart, as if Create had made it for them. It is atomic in the engine: of
// two claims of one sandbox, one gets errdefs.ErrConflict. The caller has
// just had a response from the sandbox's agent, so it need not look the
// sandbox up again.
type Claimer interface {
	Claim(ctx context.Context, warm Info, owner Owner) (Info, error)
}

// Pinger is an optional Backend capability: a cheap liveness check of the
// engine, used by /readyz.
type Pinger interface {
	Ping(ctx context.Context) error
}
