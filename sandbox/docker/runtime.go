package docker

import (
	"context"
	"sort"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// DefaultGVisorRuntime is the name the engine knows gVisor's runsc by (its
// key under "runtimes" in /etc/docker/daemon.json).
const DefaultGVisorRuntime = "runsc"

// GVisorPidsAllowance is added to a gVisor sandbox's pids limit in the
// engine, for gVisor's own kernel, which that limit counts: runsc's
// sentry and gofer threads, and (runsc's ptrace platform) one host thread
// per process of the sandbox for each kernel thread that ever ran it,
// never given back. With only the agent at work a gVisor sandbox reaches
// about 250 host pids after a few calls (runsc 0.0~20221219); the kernel
// panics the moment it cannot make a thread, and the engine starts the
// sandbox again with its processes gone. So without the allowance a
// limit such as 128 stops the whole sandbox in ordinary use, typically
// when a resume after a pause wakes every process at once.
const GVisorPidsAllowance = 384

// Home is the home directory of the sandbox image's root account.
const Home = "/root"

// tmpSize caps /tmp of a sandbox with a read-only root: it is memory,
// counted in the sandbox's memory limit.
const tmpSize = "1g"

// ServesReadOnlyRoot is true: see readOnlyRoot.
func (b *Backend) ServesReadOnlyRoot() bool { return true }

var (
	_ sandbox.RuntimeServer      = (*Backend)(nil)
	_ sandbox.ReadOnlyRootServer = (*Backend)(nil)
	_ sandbox.HibernationChecker = (*Backend)(nil)
)

// Hibernatable is false for a gVisor sandbox: hibernation first turns the
// container's restart policy off, and the engine makes runsc apply every
// update, which the runsc Debian 12 ships cannot ("runsc update" does not
// exist there). The idle lifecycle then skips the step.
func (b *Backend) Hibernatable(info sandbox.Info) bool {
	return sandbox.RuntimeOf(info) != sandbox.RuntimeGVisor
}

func noGVisorHibernation(id string) error {
	return errdefs.FailedPrecondition("sandbox %s runs under gVisor, which this engine cannot hibernate (its runsc cannot change a running container's restart policy); pause it or delete it instead", id)
}

// WithGVisorRuntime names the engine's runtime that is gVisor (default
// DefaultGVisorRuntime).
func WithGVisorRuntime(name string) Option { return func(b *Backend) { b.gvisorRuntime = name } }

// Runtimes are runc and gVisor: whether the engine has runsc is checked
// when a sandbox asks for it.
func (b *Backend) Runtimes() []string {
	return []string{sandbox.RuntimeRunc, sandbox.RuntimeGVisor}
}

// checkRuntime refuses a gVisor sandbox the engine cannot run. The engine's
// runsc runs with its own networking off (--network=none, the only way the
// runsc Debian ships starts under Docker), so a gVisor sandbox cannot join
// the bridge network; "none" and "proxy" (whose only way out is the agent's
// pipe) need no network.
func (b *Backend) checkRuntime(ctx context.Context, spec sandbox.Spec) error {
	if spec.Runtime != sandbox.RuntimeGVisor {
		return nil
	}
	if spec.Network == "bridge" {
		return errdefs.InvalidArgument("runtime gvisor cannot have network \"bridge\" on this engine (runsc runs with its own networking off); use network \"none\" or \"proxy\", or runtime runc")
	}
	return b.CheckGVisor(ctx)
}

// CheckGVisor says, in a sentence for the operator, whether the engine
// can run gVisor sandboxes (lists the runsc runtime).
func (b *Backend) CheckGVisor(ctx context.Context) error {
	if b.gvisorSeen.Load() {
		return nil
	}
	info, err := b.cli.Info(ctx)
	if err != nil {
		return engineErr("list its runtimes", err)
	}
	if _, ok := info.Runtimes[b.gvisorRuntime]; !ok {
		names := make([]string, 0, len(info.Runtimes))
		for n := range info.Runtimes {
			names = append(names, n)
		}
		sort.Strings(names)
		return errdefs.FailedPrecondition("the Docker engine has no %q runtime (it has %v), so it cannot run gVisor sandboxes; the operator must install runsc and register it in /etc/docker/daemon.json (scripts/setup.sh does both), then reload dockerd", b.gvisorRuntime, names)
	}
	b.gvisorSeen.Store(true)
	return nil
}

// readOnlyRoot makes hc's root file system read-only. The workspace is its
// own mount already; /tmp becomes a tmpfs and the home directory an
// anonymous volume (the engine fills it with the image's dot files, and
// removes it with the container), so that tools keep their caches and
// scratch files.
func readOnlyRoot(hc *container.HostConfig) {
	hc.ReadonlyRootfs = true
	hc.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=" + tmpSize}
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: Home})
}
