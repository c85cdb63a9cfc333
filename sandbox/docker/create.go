package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Create makes and starts a container for spec. The Manager has validated
// spec; a container that was made but cannot start is removed again.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	img := spec.Image
	if img == "" {
		img = b.image
	}
	if img == "" {
		return sandbox.Info{}, errdefs.InvalidArgument("no image was named and no default image is configured; name one or set default_image")
	}
	if spec.Snapshot != "" {
		if _, err := b.SnapshotOf(ctx, spec.Snapshot); err != nil {
			return sandbox.Info{}, err
		}
		img = SnapshotImage + ":" + spec.Snapshot
	}
	if _, err := b.cli.ImageInspect(ctx, img); err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.Info{}, errdefs.FailedPrecondition("image %s is not on the Docker engine; build it with `make images` (or pull it) and retry", img)
		}
		return sandbox.Info{}, engineErr("inspect image "+img, err)
	}

	if err := b.checkRuntime(ctx, spec); err != nil {
		return sandbox.Info{}, err
	}
	id := newID()
	cfg, hc := b.containerConfig(id, img, spec)
	// Made under a name List skips, and named as a sandbox only once it
	// runs: a sandboxd that dies half-way leaves no half-made sandbox, only
	// a container the next sweep removes.
	created, err := b.cli.ContainerCreate(ctx, cfg, hc, nil, nil, MakingPrefix+id)
	if err != nil {
		return sandbox.Info{}, engineErr("create a container from "+img, err)
	}
	fail := func(err error) (sandbox.Info, error) {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rmErr := b.cli.ContainerRemove(cleanup, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); rmErr != nil {
			b.log.Warn("cannot remove a container that failed to start", "container", created.ID, "err", rmErr)
		}
		return sandbox.Info{}, err
	}
	if spec.Snapshot != "" {
		if err := b.fromSnapshot(ctx, created.ID, spec.Snapshot); err != nil {
			return fail(err)
		}
	}
	if err := b.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(engineErr("start the sandbox container", err))
	}
	if err := b.cli.ContainerRename(ctx, created.ID, NamePrefix+id); err != nil {
		return fail(engineErr("name the sandbox container", err))
	}
	c, err := b.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		return sandbox.Info{}, engineErr("inspect the new sandbox", err)
	}
	return infoOf(c), nil
}

// containerConfig is the whole container definition; see the package doc.
func (b *Backend) containerConfig(id, img string, spec sandbox.Spec) (*container.Config, *container.HostConfig) {
	labels := map[string]string{
		sandbox.LabelManaged:      "true",
		sandbox.LabelTenant:       spec.Tenant,
		sandbox.LabelConversation: spec.Conversation,
		sandbox.LabelCreatedAt:    time.Now().UTC().Format(time.RFC3339Nano),
		sandbox.LabelDeployment:   b.dep.Name,
	}
	if spec.Pool != "" {
		labels[sandbox.LabelPool] = spec.Pool
		b.pooled.Store(true)
	}
	maps.Copy(labels, sandbox.NetworkLabels(spec))
	maps.Copy(labels, sandbox.LifecycleLabels(spec))
	maps.Copy(labels, sandbox.ExpiryLabels(spec))
	maps.Copy(labels, sandbox.ExtLabelsOf(spec))
	maps.Copy(labels, sandbox.SetuidLabels(spec))
	maps.Copy(labels, sandbox.RuntimeLabels(spec))
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	cfg := &container.Config{
		Image:    img,
		Hostname: "sandbox",
		// The agent is PID 1 so that it reaps every orphan in the sandbox,
		// whatever the image's entrypoint would have been.
		Entrypoint: []string{AgentPath, "init"},
		Cmd:        nil,
		WorkingDir: Workspace,
		Env:        env,
		Labels:     labels,
	}

	ws := mount.Mount{Type: mount.TypeVolume, Target: Workspace} // anonymous: removed with the container
	if spec.HostWorkspace != "" {
		ws = mount.Mount{Type: mount.TypeBind, Source: spec.HostWorkspace, Target: Workspace}
	}
	network := spec.Network
	if network == "" || network == sandbox.NetworkProxy {
		network = "none" // a proxy sandbox's only way out is the agent's pipe
	}
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
	pids := r.Pids
	if spec.Runtime == sandbox.RuntimeGVisor {
		pids += GVisorPidsAllowance
	}
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: b.agentPath, Target: AgentPath, ReadOnly: true},
			ws,
		},
		Resources: container.Resources{
			NanoCPUs:   int64(r.CPUs * 1e9),
			Memory:     r.MemoryMB << 20,
			MemorySwap: r.MemoryMB << 20, // no swap beyond the limit
			PidsLimit:  &pids,
		},
		SecurityOpt: securityOpts(spec),
		CapDrop:     []string{"ALL"},
		CapAdd:      b.caps,
		// Brought back after an engine restart, unless stopped on purpose.
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
	}
	if spec.Runtime == sandbox.RuntimeGVisor {
		hc.Runtime = b.gvisorRuntime
	}
	if spec.ReadOnlyRoot {
		readOnlyRoot(hc)
	}
	return cfg, hc
}

// newID is 12 random hex digits, the length of Docker's short ids.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// securityOpts are the sandbox's security options: no-new-privileges
// unless the spec lets set-user-ID programs work (Spec.Setuid).
func securityOpts(spec sandbox.Spec) []string {
	if spec.Setuid {
		return nil
	}
	return []string{"no-new-privileges:true"}
}
