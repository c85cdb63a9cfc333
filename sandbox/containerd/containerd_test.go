package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/images"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// Integration tests run against the real containerd when
// SANDBOXD_TEST_CONTAINERD=1; the test image is copied from Docker first
// when the namespace lacks it.

var (
	agentBin  string
	testImage = sandboxtest.Image("sandboxd-base:bookworm")
)

func TestMain(m *testing.M) {
	sandboxtest.Main(m, "SANDBOXD_TEST_CONTAINERD", &agentBin, func(dir string) error { return ensureImage(dir, testImage) })
}

// ensureImage imports image from Docker unless the namespace has the same
// build.
func ensureImage(dir, image string) error {
	b, err := New(WithAgentBinary(agentBin), WithDataDir(dir))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	imported, err := b.SyncFromDocker(ctx, image)
	if imported {
		fmt.Fprintf(os.Stderr, "imported %s from Docker into containerd namespace %s\n", image, b.Namespace())
	}
	return err
}

func needContainerd(t *testing.T) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_CONTAINERD") != "1" {
		t.Skip("set SANDBOXD_TEST_CONTAINERD=1 to run against containerd")
	}
}

func newTestBackend(t *testing.T, opts ...Option) *Backend {
	t.Helper()
	b, err := New(append([]Option{WithAgentBinary(agentBin), WithDefaultImage(testImage), WithDataDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestSuite(t *testing.T) {
	needContainerd(t)
	var b *Backend
	dataDir := t.TempDir()
	sandboxtest.Run(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		nb := newTestBackend(t, WithDeployment(d), WithDataDir(dataDir))
		if b == nil {
			b = nb
		}
		return nb
	},
		sandboxtest.WithImage(testImage),
		sandboxtest.WithIsolation(),
		sandboxtest.WithCounter(func(ctx context.Context, tenant string) (int, error) {
			// What `ctr -n sandboxd containers ls` shows, not what the backend believes.
			cs, err := b.cli.Containers(b.nsCtx(ctx), `labels."`+sandbox.LabelTenant+`"==`+tenant+`,labels."`+sandbox.LabelDeployment+`"=="`+b.dep.Name+`"`)
			return len(cs), err
		}),
		sandboxtest.WithStopper(func(ctx context.Context, id string) error {
			return b.Stop(ctx, id)
		}),
		sandboxtest.WithPauser(
			func(ctx context.Context, id string) error { return taskOf(ctx, b, id, (containerd.Task).Pause) },
			func(ctx context.Context, id string) error { return taskOf(ctx, b, id, (containerd.Task).Resume) }),
	)
}

// TestLifecycle: pause, hibernate and wake on the real containerd, each
// backend of the suite a new client on the same namespace (as a restarted
// sandboxd or another replica).
func TestLifecycle(t *testing.T) {
	needContainerd(t)
	dataDir := t.TempDir()
	sandboxtest.RunLifecycle(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		return newTestBackend(t, WithDeployment(d), WithDataDir(dataDir))
	}, sandboxtest.WithImage(testImage))
}

// taskOf runs do on sandbox id's task, as `ctr task pause|resume` would.
func taskOf(ctx context.Context, b *Backend, id string, do func(containerd.Task, context.Context) error) error {
	ctx = b.nsCtx(ctx)
	c, err := b.cli.LoadContainer(ctx, NamePrefix+id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return err
	}
	return do(t, ctx)
}

// startManager returns a started Manager over b and a fresh tenant whose
// sandboxes are removed at the end.
func startManager(t *testing.T, b *Backend) (*sandbox.Manager, string) {
	t.Helper()
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	tenant := "ct-" + newID()
	t.Cleanup(func() {
		m.Close()
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, _ := b.List(c)
		for _, i := range list {
			if i.Tenant == tenant {
				if err := b.Remove(c, i.ID); err != nil {
					t.Errorf("cleanup of %s: %v", i.ID, err)
				}
			}
		}
	})
	return m, tenant
}

func execOut(t *testing.T, m *sandbox.Manager, tenant, conv string, argv ...string) *proto.ExecResponse {
	t.Helper()
	c, _, err := m.Agent(ctx(t), tenant, conv)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	res, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: argv, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec %q: %v", argv, err)
	}
	return res
}

// TestIsolationAndLimits checks from inside a sandbox what a user would:
// the limits asked for, no network but lo, no new privileges, Docker's
// capability set, and a read-only agent binary.
func TestIsolationAndLimits(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "limits", Image: testImage,
		Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 256, Pids: 100}}); err != nil {
		t.Fatal(err)
	}
	sh := func(script string) string {
		t.Helper()
		res := execOut(t, m, tenant, "limits", "sh", "-c", script)
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d, stderr %q", script, res.ExitCode, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	cg := func(v1, v2 string) string {
		return sh(fmt.Sprintf("if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cat /sys/fs/cgroup/%s; else cat /sys/fs/cgroup/%s; fi", v2, v1))
	}
	if got := cg("memory/memory.limit_in_bytes", "memory.max"); got != "268435456" {
		t.Errorf("memory limit inside = %s, want 268435456", got)
	}
	if got := cg("pids/pids.max", "pids.max"); got != "100" {
		t.Errorf("pids limit inside = %s, want 100", got)
	}
	if got := cg("cpu/cpu.cfs_quota_us", "cpu.max"); got != "150000" && got != "150000 100000" {
		t.Errorf("cpu quota inside = %s, want 150000 per 100000", got)
	}
	if got := sh("ls /sys/class/net"); got != "lo" {
		t.Errorf("network interfaces inside = %q, want only lo", got)
	}
	if got := sh("grep NoNewPrivs /proc/self/status"); !strings.HasSuffix(got, "1") {
		t.Errorf("%s, want no_new_privs set", got)
	}
	var want uint64
	for _, c := range docker.DefaultCaps {
		want |= 1 << capBit[c]
	}
	if got := sh("grep CapBnd /proc/self/status"); !strings.HasSuffix(got, fmt.Sprintf("%016x", want)) {
		t.Errorf("%s, want the capability set %v (%016x)", got, docker.DefaultCaps, want)
	}
	res := execOut(t, m, tenant, "limits", "sh", "-c", "echo x >> "+docker.AgentPath)
	if res.ExitCode == 0 {
		t.Error("the agent binary could be written from inside the sandbox")
	}
	if got := sh("hostname"); got != "sandbox" {
		t.Errorf("hostname = %q, want sandbox", got)
	}
}

// capBit numbers the capabilities of docker.DefaultCaps (linux/capability.h).
var capBit = map[string]uint{
	"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5,
	"SETGID": 6, "SETUID": 7, "SYS_PTRACE": 19,
}

func TestBridgeNetworkRefused(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	_, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "bridge", Image: testImage, Network: "bridge"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("Create with network bridge = %v, want invalid_argument saying the backend has no network", err)
	}
	if n, _ := b.cli.Containers(b.nsCtx(ctx(t)), `labels."`+sandbox.LabelTenant+`"==`+tenant); len(n) != 0 {
		t.Errorf("a refused Create left %d containers", len(n))
	}
}

func TestMissingImage(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	_, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "noimg", Image: "sandboxd-no-such-image:v0"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "containerd-import.sh") {
		t.Fatalf("Create with a missing image = %v, want failed_precondition naming the import script", err)
	}
}

// TestWorkspaces: a sandbox's own workspace lives under the data dir and is
// removed with it; a host workspace is shared with the host and kept.
func TestWorkspaces(t *testing.T) {
	needContainerd(t)
	dataDir := t.TempDir()
	b := newTestBackend(t, WithDataDir(dataDir))
	m, tenant := startManager(t, b)

	own, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "own", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if res := execOut(t, m, tenant, "own", "sh", "-c", "echo mine > /workspace/f"); res.ExitCode != 0 {
		t.Fatalf("write in the workspace: %+v", res)
	}
	ownDir := b.workspaceDir(own.ID)
	if data, err := os.ReadFile(filepath.Join(ownDir, "f")); err != nil || string(data) != "mine\n" {
		t.Fatalf("the workspace file on the host = %q, %v", data, err)
	}

	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "from-host"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hw, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "host", Image: testImage, HostWorkspace: hostDir})
	if err != nil {
		t.Fatal(err)
	}
	if res := execOut(t, m, tenant, "host", "cat", "/workspace/from-host"); string(res.Stdout) != "hi\n" {
		t.Fatalf("the host file inside = %+v", res)
	}

	if err := m.Delete(ctx(t), tenant, own.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ownDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox's own workspace survived its removal: %v", err)
	}
	if err := m.Delete(ctx(t), tenant, hw.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "from-host")); err != nil {
		t.Errorf("removing a sandbox touched its host workspace: %v", err)
	}
	// No snapshot is left behind either.
	sn := b.cli.SnapshotService(DefaultSnapshotter)
	for _, id := range []string{own.ID, hw.ID} {
		if _, err := sn.Stat(b.nsCtx(ctx(t)), NamePrefix+id); err == nil {
			t.Errorf("the snapshot of %s survived its removal", id)
		}
	}
}

// TestImportFromDocker copies the small base image into a namespace of its
// own, then removes the namespace again.
func TestImportFromDocker(t *testing.T) {
	needContainerd(t)
	base := smallDockerImage(t)
	ns := "sandboxd-test-" + newID()
	// A tag of our own, so that the test can give it a new build below.
	small := "sandboxd-import-test-" + newID() + ":v1"
	dockerBuild(t, small, "FROM "+base+"\nLABEL io.sandboxd.test=first\n")
	b := newTestBackend(t, WithNamespace(ns))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(b.nsCtx(context.Background()), 2*time.Minute)
		defer cancel()
		is := b.cli.ImageService()
		list, _ := is.List(c)
		for _, i := range list {
			_ = is.Delete(c, i.Name, images.SynchronousDelete())
		}
		if err := b.cli.NamespaceService().Delete(c, ns); err != nil {
			t.Logf("namespace %s not removed: %v", ns, err)
		}
	})
	if ok, err := b.HasImage(ctx(t), small); err != nil || ok {
		t.Fatalf("HasImage in a fresh namespace = %v, %v", ok, err)
	}
	if err := b.ImportFromDocker(ctx(t), small); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.HasImage(ctx(t), small); err != nil || !ok {
		t.Fatalf("HasImage after the import = %v, %v", ok, err)
	}
	if imported, err := b.SyncFromDocker(ctx(t), small); err != nil || imported {
		t.Errorf("SyncFromDocker right after the import = %v, %v; want nothing to do", imported, err)
	}
	dockerBuild(t, small, "FROM "+base+"\nLABEL io.sandboxd.test=second\n")
	if imported, err := b.SyncFromDocker(ctx(t), small); err != nil || !imported {
		t.Errorf("SyncFromDocker after Docker got a new build = %v, %v; want it imported", imported, err)
	}
	if imported, err := b.SyncFromDocker(ctx(t), small); err != nil || imported {
		t.Errorf("SyncFromDocker once more = %v, %v; want nothing to do", imported, err)
	}
	img, err := b.cli.GetImage(b.nsCtx(ctx(t)), normalize(small))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := img.IsUnpacked(b.nsCtx(ctx(t)), DefaultSnapshotter); err != nil || !ok {
		t.Errorf("the imported image is not unpacked: %v, %v", ok, err)
	}
	err = b.ImportFromDocker(ctx(t), "sandboxd-no-such-image:v0")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "docker save") {
		t.Errorf("import of a missing image = %v, want failed_precondition naming docker save", err)
	}
}

// TestAttachCloseEndsExec: closing an agent pipe ends `sandbox-agent attach`
// through stdin (exit 0), not by the SIGKILL fallback, and leaves the agent
// daemon serving the next pipe.
func TestAttachCloseEndsExec(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "attach", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rwc, err := b.AttachAgent(ctx(t), info.ID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := agent.NewClient(ctx(t), rwc)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"echo", "pipe"}, Timeout: 20 * time.Second})
		if err != nil || string(res.Stdout) != "pipe\n" {
			t.Fatalf("pipe %d: Exec = %+v, %v", i, res, err)
		}
		c.Close()
		rwc.Close()
		if code := rwc.(*execPipe).code; code != 0 {
			t.Fatalf("pipe %d: the attach exec ended with %d after Close, want 0 (ended by its stdin)", i, code)
		}
	}
}

// TestNoFIFOLeft: the FIFOs of agent pipes go away when a pipe closes and
// when its sandbox is removed under it.
func TestNoFIFOLeft(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "fifo", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx(t), tenant, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	if n := fifos(t, b); n == 0 {
		t.Fatalf("no FIFO under %s while a pipe is open; the test looks in the wrong place", b.fifoDir())
	}
	if err := b.Remove(ctx(t), info.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the pipe did not end within 15s of the removal")
	}
	m.Close() // waits for the pipe's exec to be reaped
	if n := fifos(t, b); n != 0 {
		t.Fatalf("%d FIFOs left under %s after the sandbox was removed", n, b.fifoDir())
	}
}

func fifos(t *testing.T, b *Backend) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(b.fifoDir(), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeNamedPipe != 0 {
			n++
		}
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return n
}

// smallDockerImage is a small Debian image the machine has: the base the
// image build made, or the one it pulled.
func smallDockerImage(t *testing.T) string {
	t.Helper()
	for _, img := range []string{"sandboxd-base:bookworm", "debian:bookworm-slim"} {
		if exec.Command("docker", "image", "inspect", img).Run() == nil {
			return img
		}
	}
	t.Skip("no small Debian image in Docker (run make images, which makes sandboxd-base:bookworm)")
	return ""
}

// dockerBuild builds dockerfile (no context) as tag; the image is removed
// at the end of the test, even once a later build took its tag.
func dockerBuild(t *testing.T, tag, dockerfile string) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), "docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader(dockerfile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
	id := strings.TrimSpace(string(out)) // -q prints the image id
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
}
