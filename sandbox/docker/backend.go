// Package docker is the sandbox backend on a Docker Engine. A sandbox is one
// container named sandboxd-<id> whose PID 1 is `sandbox-agent init`, with the
// agent binary bind-mounted read-only from the host, the workspace at
// /workspace (an anonymous volume removed with the container, or a host
// directory bind-mounted when the spec names one), no network by default,
// CPU/memory/pids limits, no-new-privileges, and all capabilities dropped
// but the few that developer tools need.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Paths inside the sandbox.
const (
	// AgentPath is where the host's agent binary is bind-mounted (read-only).
	AgentPath = "/opt/sandboxd/bin/sandbox-agent"
	// AdoptedAgentDir holds the agent copied into a container sandboxd did
	// not create (it has no bind mount).
	AdoptedAgentDir = "/tmp/.sandboxd-agent-bin"
	// Workspace is the workspace root.
	Workspace = "/workspace"
	// NamePrefix starts every container name.
	NamePrefix = "sandboxd-"
)

// DefaultCaps are the capabilities a sandbox keeps after dropping ALL. The
// workspace belongs to whoever checked it out, and the tools run as root:
//   - CHOWN, DAC_OVERRIDE, FOWNER, FSETID: package managers (apt, pip, npm)
//     and build tools create, chmod and chown files they do not own;
//   - SETUID, SETGID: apt drops to its _apt user, and tools run helpers as
//     other users;
//   - KILL: the agent signals whole process groups, whoever owns them;
//   - SYS_PTRACE: debuggers (dlv, lldb, debugpy attach) trace their debuggee.
//
// Left out on purpose: NET_RAW (ping spoofing), MKNOD, SYS_CHROOT,
// AUDIT_WRITE, NET_BIND_SERVICE — no sandbox tool needs them.
var DefaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL", "SYS_PTRACE"}

// DefaultResources apply where a spec leaves a limit at 0.
var DefaultResources = sandbox.Resources{CPUs: 2, MemoryMB: 4096, Pids: 1024}

// Backend is a sandbox.Backend on a Docker Engine. It holds no state beyond
// its client (and whether it has seen pool sandboxes): every response comes
// from the engine.
type Backend struct {
	cli       *client.Client
	ownsCli   bool
	log       *slog.Logger
	agentPath string // on the host
	agentSize int64
	agentSum  string // short sha256, names the adopted copy
	image     string
	caps      []string
	defaults  sandbox.Resources
	dep       sandbox.Deployment
	// pooled is set once the deployment is seen to have pool sandboxes:
	// List then reads the claim records beside the containers.
	pooled atomic.Bool
	// started is when the backend was made: a snapshot's part made before
	// is a dead sandboxd's.
	started time.Time
	// gvisorRuntime is the engine's name for runsc; gvisorSeen is set once
	// the engine was seen to list it.
	gvisorRuntime string
	gvisorSeen    atomic.Bool
}

var (
	_ sandbox.Backend           = (*Backend)(nil)
	_ sandbox.Pinger            = (*Backend)(nil)
	_ sandbox.UnlabelledCounter = (*Backend)(nil)
	_ sandbox.ResumeHinter      = (*Backend)(nil)
)

// Option configures a Backend.
type Option func(*Backend)

// WithAgentBinary names the static sandbox-agent binary on the host; it is
// required.
func WithAgentBinary(path string) Option { return func(b *Backend) { b.agentPath = path } }

// WithDefaultImage is used when a spec names no image.
func WithDefaultImage(image string) Option { return func(b *Backend) { b.image = image } }

// WithExtraCaps adds capabilities to DefaultCaps (e.g. "NET_BIND_SERVICE").
func WithExtraCaps(caps ...string) Option {
	return func(b *Backend) { b.caps = append(b.caps, caps...) }
}

// WithDefaultResources replaces DefaultResources.
func WithDefaultResources(r sandbox.Resources) Option { return func(b *Backend) { b.defaults = r } }

// WithDeployment is the deployment the backend works for (default
// sandbox.DefaultDeploymentName): it labels every container it makes and
// sees only that deployment's.
func WithDeployment(d sandbox.Deployment) Option { return func(b *Backend) { b.dep = d } }

// WithLogger sets the logger (agent stderr goes there).
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// WithClient uses cli instead of one made from the environment; the caller
// keeps ownership of it.
func WithClient(cli *client.Client) Option { return func(b *Backend) { b.cli = cli } }

// New returns a Backend on the engine named by the environment (DOCKER_HOST
// and friends), negotiating the API version. It does not contact the engine.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{started: time.Now(),
		log:           slog.New(slog.DiscardHandler),
		caps:          append([]string(nil), DefaultCaps...),
		defaults:      DefaultResources,
		gvisorRuntime: DefaultGVisorRuntime,
	}
	for _, opt := range opts {
		opt(b)
	}
	b.dep = b.dep.OrDefault()
	if err := sandbox.ValidateDeployment(b.dep.Name); err != nil {
		return nil, err
	}
	if b.agentPath == "" {
		return nil, errdefs.InvalidArgument("the docker backend needs the sandbox-agent binary; build it with `make build` and pass its path")
	}
	size, sum, err := fileDigest(b.agentPath)
	if err != nil {
		return nil, errdefs.FailedPrecondition("the sandbox-agent binary %s cannot be read (%v); build it with `make build`", b.agentPath, err)
	}
	b.agentSize, b.agentSum = size, sum
	if b.cli == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, errdefs.InvalidArgument("the Docker client cannot be configured from the environment: %v; check DOCKER_HOST", err)
		}
		b.cli, b.ownsCli = cli, true
	}
	return b, nil
}

// Name is "docker".
func (b *Backend) Name() string { return "docker" }

// Deployment is the deployment the backend works for.
func (b *Backend) Deployment() sandbox.Deployment { return b.dep }

// ResumeHint is the command that unpauses the sandbox's container.
func (b *Backend) ResumeHint(info sandbox.Info) string {
	return "docker unpause " + NamePrefix + info.ID
}

// Close releases the client when the Backend made it.
func (b *Backend) Close() error {
	if b.ownsCli {
		return b.cli.Close()
	}
	return nil
}

// Ping checks that the engine responds.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cli.Ping(ctx); err != nil {
		return engineErr("answer a ping", err)
	}
	return nil
}

func fileDigest(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return 0, "", fmt.Errorf("not an executable file")
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil))[:16], nil
}
