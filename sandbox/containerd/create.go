package containerd

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/containers"
	ctdapparmor "github.com/containerd/containerd/contrib/apparmor"
	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/pkg/apparmor"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// cfsPeriod is the CFS period the CPU quota is computed against (µs).
const cfsPeriod = 100000

// Create makes a container for spec and starts its task. The Manager has
// validated spec; whatever was made before a failure is removed again.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	ctx = b.nsCtx(ctx)
	switch spec.Network {
	case "", "none", sandbox.NetworkProxy:
	case "bridge":
		return sandbox.Info{}, errdefs.InvalidArgument("the containerd backend gives sandboxes no network (it has no CNI set-up); leave network unset or \"none\", or use the docker backend for \"bridge\"")
	default:
		return sandbox.Info{}, errdefs.InvalidArgument("network %q is not supported; use \"none\" or \"proxy\"", spec.Network)
	}
	name := spec.Image
	if name == "" {
		name = b.image
	}
	var snap images.Image
	if spec.Snapshot != "" {
		if spec.HostWorkspace != "" {
			return sandbox.Info{}, errdefs.InvalidArgument("a sandbox made from a snapshot gets the snapshot's workspace; leave the host workspace unset")
		}
		var err error
		if snap, err = b.snapshotRecord(ctx, spec.Snapshot); err != nil {
			return sandbox.Info{}, err
		}
		name = snap.Name
	}
	if name == "" {
		return sandbox.Info{}, errdefs.InvalidArgument("no image was named and no default image is configured; name one or set default_image")
	}
	// The runtime goes before the image: a refused runtime makes nothing.
	withRuntime, err := b.withRuntime(spec)
	if err != nil {
		return sandbox.Info{}, err
	}
	img, err := b.resolveImage(ctx, name)
	if err != nil {
		return sandbox.Info{}, err
	}

	id := newID()
	ws := spec.HostWorkspace
	if ws == "" {
		ws = b.workspaceDir(id)
	}
	ok := false
	defer func() {
		if !ok && spec.HostWorkspace == "" {
			os.RemoveAll(ws)
		}
	}()

	// The lease keeps the new snapshot from garbage collection until the
	// container record references it.
	lctx, done, err := b.cli.WithLease(ctx)
	if err != nil {
		return sandbox.Info{}, engineErr("take a lease", err)
	}
	defer done(context.WithoutCancel(ctx))
	// Made without LabelManaged, so that no listing shows it, and marked
	// as being made: a sandboxd that dies half-way leaves no half-made
	// sandbox, only a container the next listing removes (sweepMaking).
	l := labels(spec, b.dep.Name)
	delete(l, sandbox.LabelManaged)
	l[labelMaking] = stamp(time.Now())
	maps.Copy(l, imageLabels(img))
	c, err := b.cli.NewContainer(lctx, NamePrefix+id,
		containerd.WithImage(img),
		containerd.WithSnapshotter(b.snapshotter),
		containerd.WithNewSnapshot(NamePrefix+id, img),
		withRuntime,
		containerd.WithContainerLabels(l),
		containerd.WithNewSpec(b.specOpts(img, ws, spec)...),
	)
	if err != nil {
		return sandbox.Info{}, engineErr("create a container from "+name, err)
	}
	cleanup := func(err error) (sandbox.Info, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if t, terr := c.Task(cctx, nil); terr == nil {
			_, _ = t.Delete(cctx, withProcessKill)
		}
		if derr := c.Delete(cctx, containerd.WithSnapshotCleanup); derr != nil {
			b.log.Warn("cannot remove a container that failed to start", "container", c.ID(), "err", derr)
		}
		return sandbox.Info{}, err
	}
	// The workspace is made once the container exists, so that the sweep
	// of a half-made one removes it too.
	if spec.HostWorkspace == "" {
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return cleanup(errdefs.Internal("the workspace directory %s cannot be made: %v; check the data dir", ws, err))
		}
	}
	if spec.Snapshot != "" {
		if err := b.fillWorkspace(ctx, snap, ws); err != nil {
			return cleanup(err)
		}
	}
	// The agent logs into its own files; its init stdio goes nowhere, so a
	// sandbox never depends on sandboxd reading a FIFO.
	t, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		return cleanup(engineErr("create the sandbox task", err))
	}
	if err := t.Start(ctx); err != nil {
		return cleanup(engineErr("start the sandbox task", err))
	}
	if _, err := c.SetLabels(ctx, map[string]string{sandbox.LabelManaged: "true", labelMaking: ""}); err != nil {
		return cleanup(engineErr("mark the sandbox as made", err))
	}
	ok = true // the sandbox exists from here on, whatever inspecting it says
	return b.info(ctx, c)
}

// resolveImage finds name in the namespace and unpacks it for the snapshotter.
func (b *Backend) resolveImage(ctx context.Context, name string) (containerd.Image, error) {
	ref := normalize(name)
	img, err := b.cli.GetImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return nil, errdefs.FailedPrecondition("image %s is not in containerd namespace %s; copy it from Docker with `scripts/containerd-import.sh %s %s` and retry",
			name, b.ns, name, b.ns)
	}
	if err != nil {
		return nil, engineErr("look up image "+name, err)
	}
	unpacked, err := img.IsUnpacked(ctx, b.snapshotter)
	if err != nil {
		return nil, engineErr("check image "+name, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, b.snapshotter); err != nil {
			return nil, engineErr("unpack image "+name, err)
		}
	}
	return img, nil
}

// normalize turns a Docker short name into the full reference containerd
// stores ("sandboxd-sandbox:latest" -> "docker.io/library/sandboxd-sandbox:latest").
func normalize(name string) string {
	if n, err := reference.ParseDockerRef(name); err == nil {
		return n.String()
	}
	return name
}

func labels(spec sandbox.Spec, deployment string) map[string]string {
	l := map[string]string{
		sandbox.LabelDeployment:   deployment,
		sandbox.LabelManaged:      "true",
		sandbox.LabelTenant:       spec.Tenant,
		sandbox.LabelConversation: spec.Conversation,
		sandbox.LabelCreatedAt:    time.Now().UTC().Format(time.RFC3339Nano),
	}
	maps.Copy(l, sandbox.NetworkLabels(spec))
	maps.Copy(l, sandbox.LifecycleLabels(spec))
	maps.Copy(l, sandbox.ExpiryLabels(spec))
	maps.Copy(l, sandbox.ExtLabelsOf(spec))
	maps.Copy(l, sandbox.SetuidLabels(spec))
	maps.Copy(l, sandbox.RuntimeLabels(spec))
	return l
}

// specOpts is the whole OCI spec; see the package doc. The default spec
// already creates new pid, ipc, uts, mount and network namespaces; a network
// namespace without a path is a bare one in which runc brings up only lo.
func (b *Backend) specOpts(img containerd.Image, ws string, spec sandbox.Spec) []oci.SpecOpts {
	r := spec.Resources
	if r.CPUs == 0 {
		r.CPUs = b.defaults.CPUs
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = b.defaults.MemoryMB
	}
	if r.Pids == 0 {
		r.Pids = b.defaults.Pids
	}
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	caps := make([]string, 0, len(b.caps))
	for _, c := range b.caps {
		caps = append(caps, "CAP_"+strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	mem := uint64(r.MemoryMB) << 20
	pids := r.Pids
	if spec.Runtime == sandbox.RuntimeGVisor {
		// gVisor's own host threads count in the cgroup (docker's
		// GVisorPidsAllowance says how many, and why).
		pids += docker.GVisorPidsAllowance
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		// The agent is PID 1 so that it reaps every orphan in the sandbox,
		// whatever the image's entrypoint would have been.
		oci.WithProcessArgs(docker.AgentPath, "init"),
		oci.WithProcessCwd(docker.Workspace),
		oci.WithEnv(env),
		oci.WithHostname("sandbox"),
		oci.WithMounts([]specs.Mount{
			{Destination: docker.AgentPath, Type: "bind", Source: b.agentPath, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: docker.Workspace, Type: "bind", Source: ws, Options: []string{"rbind", "rw"}},
			// Tools read their own limits there (as under Docker); runc
			// shows only the sandbox's own cgroups, read-only.
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		}),
		oci.WithCPUCFS(int64(r.CPUs*cfsPeriod), cfsPeriod),
		oci.WithMemoryLimit(mem),
		withMemorySwap(int64(mem)), // no swap beyond the limit
		oci.WithPidsLimit(pids),
		oci.WithCapabilities(caps),
	}
	if !spec.Setuid {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	// Last: the profile allows syscalls by the capabilities above.
	opts = append(opts, seccomp.WithDefaultProfile())
	// Where the host enforces AppArmor, confine sandboxes the way Docker's
	// docker-default profile does (containerd generates the same template).
	if apparmor.HostSupports() {
		opts = append(opts, ctdapparmor.WithDefaultProfile("sandboxd-default"))
	}
	return opts
}

// withMemorySwap caps memory+swap where the kernel accounts swap (cgroup v1
// without swap accounting has no memsw file, and runc would refuse it).
func withMemorySwap(limit int64) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *oci.Spec) error {
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
				return nil // cgroup v1 without swap accounting
			}
		}
		return oci.WithMemorySwap(limit)(ctx, cl, c, s)
	}
}
