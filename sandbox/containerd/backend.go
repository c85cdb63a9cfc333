// Package containerd is the sandbox backend on a containerd daemon, without
// Docker. A sandbox is one container named sandboxd-<id> in its own
// containerd namespace (default "sandboxd"), carrying the sandbox.Label*
// labels (the conversation map, found again after a restart), whose task
// runs `sandbox-agent init` with the agent binary bind-mounted read-only at
// the same path as the Docker backend. Each sandbox gets a fresh network
// namespace holding only lo, CPU/memory/pids limits in its OCI spec,
// no-new-privileges, containerd's default seccomp profile (and its default
// AppArmor profile where the host enforces AppArmor) and the Docker
// backend's capability set; its workspace is a host directory under the
// data dir (or the spec's host workspace) bind-mounted at /workspace.
//
// Runtime gvisor runs the sandbox under the same runc shim with gVisor's
// runsc as the shim's binary (gvisor.go); the backend serves it when runsc
// is installed.
//
// Images are not pulled: copy them from Docker with ImportFromDocker or
// scripts/containerd-import.sh. Unlike Docker's unless-stopped policy,
// nothing restarts a sandbox whose task died (a host reboot): it is
// reported stopped until it is woken.
//
// Pause freezes the task (the cgroup freezer). Hibernate stops the task and
// deletes it, keeping the container, whose snapshot holds the sandbox's own
// file system changes, and marks it (LabelHibernatedAt); Wake starts a new
// task on it with the spec creation gave it.
//
// A sandbox snapshot (snapshot.go) is an image: the sandbox's image with
// its own changes as one more layer, plus a tar of its workspace in the
// content store; a sandbox made from one is made from that image, its
// workspace unpacked from the tar. A container is labelled as a sandbox
// only once its task runs, so that a creation cut off half-way leaves none.
package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/identifiers"
	"github.com/containerd/containerd/namespaces"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// Defaults of the connection and of the containers.
const (
	DefaultAddress     = "/run/containerd/containerd.sock"
	DefaultNamespace   = "sandboxd"
	DefaultSnapshotter = "overlayfs"
	DefaultRuntime     = "io.containerd.runc.v2"
	// NamePrefix starts every container id.
	NamePrefix = "sandboxd-"
	// dialTimeout bounds New's first connection.
	dialTimeout = 5 * time.Second
)

// Backend is a sandbox.Backend on containerd. It holds no state beyond its
// client and settings: every response comes from containerd. It starts no
// goroutine of its own; each agent pipe owns one (execPipe), ended by the
// pipe's Close. Close the Backend after every pipe.
type Backend struct {
	cli         *containerd.Client
	ownsCli     bool
	address     string
	ns          string
	snapshotter string
	runtime     string
	log         *slog.Logger
	agentPath   string // on the host
	dataDir     string // workspaces live in dataDir/workspaces/<id>
	image       string
	caps        []string
	defaults    sandbox.Resources
	dep         sandbox.Deployment
	started     time.Time // what a sandboxd that died left is older
	// runsc is gVisor's binary as configured; gvisorScript, the script
	// that runs it for the shim, is set when gVisor sandboxes can be made,
	// gvisorErr says why not otherwise (gvisor.go).
	runsc        string
	gvisorScript string
	gvisorErr    error
	// noOverlayDiff makes snapshots use containerd's diff service only
	// (tests of both ways).
	noOverlayDiff bool
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

// WithDataDir is sandboxd's data dir; sandbox workspaces are made under it.
// It is required.
func WithDataDir(dir string) Option { return func(b *Backend) { b.dataDir = dir } }

// WithDefaultImage is used when a spec names no image.
func WithDefaultImage(image string) Option { return func(b *Backend) { b.image = image } }

// WithAddress is containerd's socket (default DefaultAddress).
func WithAddress(addr string) Option { return func(b *Backend) { b.address = addr } }

// WithNamespace is the containerd namespace of every sandbox and image
// (default DefaultNamespace).
func WithNamespace(ns string) Option { return func(b *Backend) { b.ns = ns } }

// WithSnapshotter names the snapshotter (default DefaultSnapshotter).
func WithSnapshotter(name string) Option { return func(b *Backend) { b.snapshotter = name } }

// WithRuntime names the runtime shim of runc sandboxes (default
// DefaultRuntime). gVisor sandboxes always run under DefaultRuntime's shim
// with runsc as its binary (gvisor.go).
func WithRuntime(name string) Option { return func(b *Backend) { b.runtime = name } }

// WithExtraCaps adds capabilities to docker.DefaultCaps (e.g. "NET_BIND_SERVICE").
func WithExtraCaps(caps ...string) Option {
	return func(b *Backend) { b.caps = append(b.caps, caps...) }
}

// WithDefaultResources replaces docker.DefaultResources.
func WithDefaultResources(r sandbox.Resources) Option { return func(b *Backend) { b.defaults = r } }

// WithDeployment is the deployment the backend works for (default
// sandbox.DefaultDeploymentName): it labels every container it makes and
// sees only that deployment's.
func WithDeployment(d sandbox.Deployment) Option { return func(b *Backend) { b.dep = d } }

// WithLogger sets the logger (agent stderr goes there).
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// WithClient uses cli instead of dialing the address; the caller keeps
// ownership of it.
func WithClient(cli *containerd.Client) Option { return func(b *Backend) { b.cli = cli } }

// New returns a Backend connected to containerd; it fails when containerd
// does not respond within a few seconds.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{
		address:     DefaultAddress,
		ns:          DefaultNamespace,
		snapshotter: DefaultSnapshotter,
		runtime:     DefaultRuntime,
		log:         slog.New(slog.DiscardHandler),
		caps:        append([]string(nil), docker.DefaultCaps...),
		defaults:    docker.DefaultResources,
		started:     time.Now(),
		runsc:       DefaultRunsc,
	}
	for _, opt := range opts {
		opt(b)
	}
	b.dep = b.dep.OrDefault()
	if err := sandbox.ValidateDeployment(b.dep.Name); err != nil {
		return nil, err
	}
	if b.agentPath == "" {
		return nil, errdefs.InvalidArgument("the containerd backend needs the sandbox-agent binary; build it with `make build` and pass its path")
	}
	if err := checkExecutable(b.agentPath); err != nil {
		return nil, errdefs.FailedPrecondition("the sandbox-agent binary %s cannot be used (%v); build it with `make build`", b.agentPath, err)
	}
	if b.dataDir == "" || !filepath.IsAbs(b.dataDir) {
		return nil, errdefs.InvalidArgument("the containerd backend needs an absolute data dir for the workspaces, got %q", b.dataDir)
	}
	if err := identifiers.Validate(b.ns); err != nil {
		return nil, errdefs.InvalidArgument("containerd namespace %q is invalid (%v); use letters, digits, '.', '_' and '-'", b.ns, err)
	}
	if b.cli == nil {
		cli, err := containerd.New(b.address, containerd.WithDefaultNamespace(b.ns), containerd.WithTimeout(dialTimeout))
		if err != nil {
			return nil, errdefs.Unavailable("containerd cannot be reached at %s (%v); start containerd or set containerd.address", b.address, err)
		}
		b.cli, b.ownsCli = cli, true
	}
	b.sweepMounts()
	b.setupGVisor(context.Background())
	return b, nil
}

// Name is "containerd".
func (b *Backend) Name() string { return "containerd" }

// Deployment is the deployment the backend works for.
func (b *Backend) Deployment() sandbox.Deployment { return b.dep }

// ResumeHint is the command that resumes the sandbox's paused task.
func (b *Backend) ResumeHint(info sandbox.Info) string {
	return "ctr -n " + b.ns + " task resume " + NamePrefix + info.ID
}

// Namespace is the containerd namespace the backend works in.
func (b *Backend) Namespace() string { return b.ns }

// Client is the containerd client (for tests and image import).
func (b *Backend) Client() *containerd.Client { return b.cli }

// Close releases the client when the Backend made it.
func (b *Backend) Close() error {
	if b.ownsCli {
		return b.cli.Close()
	}
	return nil
}

// Ping checks that containerd responds.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cli.Version(b.nsCtx(ctx)); err != nil {
		return engineErr("answer a version request", err)
	}
	return nil
}

// nsCtx puts the backend's namespace on ctx; every containerd call needs it.
func (b *Backend) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, b.ns)
}

// workspaceDir is where a sandbox's own workspace lives on the host.
func (b *Backend) workspaceDir(id string) string {
	return filepath.Join(b.dataDir, "containerd", "workspaces", id)
}

// fifoDir holds the FIFOs of agent execs, so that a leak would show in
// sandboxd's own data dir.
func (b *Backend) fifoDir() string {
	return filepath.Join(b.dataDir, "containerd", "fifo")
}

func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}

// newID is 12 random hex digits, like the Docker backend's ids.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
