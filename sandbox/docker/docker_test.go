package docker

import (
	"context"
	"errors"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// Integration tests run against the real engine when SANDBOXD_TEST_DOCKER=1.

var (
	agentBin  string
	testImage = sandboxtest.Image("sandboxd-base:bookworm")
)

func TestMain(m *testing.M) { sandboxtest.Main(m, "SANDBOXD_TEST_DOCKER", &agentBin, nil) }

func needDocker(t *testing.T) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
}

func newTestBackend(t *testing.T, opts ...Option) *Backend {
	t.Helper()
	b, err := New(append([]Option{WithAgentBinary(agentBin), WithDefaultImage(testImage)}, opts...)...)
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

// startManager returns a started Manager over b; each test uses its own
// tenant, and every container it made is removed at the end.
func startManager(t *testing.T, b *Backend) (*sandbox.Manager, string) {
	t.Helper()
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	tenant := "dt-" + newID()
	t.Cleanup(func() {
		m.Close()
		removeTenant(t, b.cli, tenant)
	})
	return m, tenant
}

func removeTenant(t *testing.T, cli *client.Client, tenant string) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := cli.ContainerList(c, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelTenant+"="+tenant))})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, ct := range cs {
		if err := cli.ContainerRemove(c, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("cleanup of %s: %v", ct.ID[:12], err)
		}
	}
}

func TestSuite(t *testing.T) {
	needDocker(t)
	var b *Backend
	sandboxtest.Run(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		nb := newTestBackend(t, WithDeployment(d))
		if b == nil {
			b = nb
		}
		return nb
	},
		sandboxtest.WithImage(testImage),
		sandboxtest.WithIsolation(),
		sandboxtest.WithCounter(func(ctx context.Context, tenant string) (int, error) {
			// What `docker ps -a --filter label=...` shows, not what the backend believes.
			cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
				filters.Arg("label", sandbox.LabelTenant+"="+tenant), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))})
			return len(cs), err
		}),
		sandboxtest.WithStopper(func(ctx context.Context, id string) error {
			timeout := 2
			return b.cli.ContainerStop(ctx, NamePrefix+id, container.StopOptions{Timeout: &timeout})
		}),
		sandboxtest.WithPauser(
			func(ctx context.Context, id string) error { return b.cli.ContainerPause(ctx, NamePrefix+id) },
			func(ctx context.Context, id string) error { return b.cli.ContainerUnpause(ctx, NamePrefix+id) }),
	)
}

// TestLifecycle runs the lifecycle suite: pause, hibernate and wake as the
// engine itself reports them.
func TestLifecycle(t *testing.T) {
	needDocker(t)
	sandboxtest.RunLifecycle(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		return newTestBackend(t, WithDeployment(d))
	}, sandboxtest.WithImage(testImage))
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

// interfaces lists the network interfaces in /proc/net/dev output.
func interfaces(devs string) []string {
	var out []string
	for _, line := range strings.Split(devs, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			out = append(out, strings.TrimSpace(name))
		}
	}
	slices.Sort(out)
	return out
}

func TestNetworkNoneHasOnlyLoopback(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "net-none"}); err != nil {
		t.Fatal(err)
	}
	res := execOut(t, m, tenant, "net-none", "cat", "/proc/net/dev")
	if got := interfaces(string(res.Stdout)); !slices.Equal(got, []string{"lo"}) {
		t.Fatalf("a network-none sandbox has interfaces %q, want only lo", got)
	}

	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "net-bridge", Network: "bridge"}); err != nil {
		t.Fatal(err)
	}
	res = execOut(t, m, tenant, "net-bridge", "cat", "/proc/net/dev")
	if got := interfaces(string(res.Stdout)); !slices.Contains(got, "eth0") {
		t.Errorf("a bridge sandbox has interfaces %q, want eth0 among them", got)
	}
}

func TestLimitsAndPrivileges(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "limits",
		Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 512, Pids: 256}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.cli.ContainerInspect(ctx(t), NamePrefix+info.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	if hc.NanoCPUs != 1_500_000_000 || hc.Memory != 512<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("container limits: NanoCPUs %d, Memory %d, PidsLimit %v; want 1.5e9, 512 MiB, 256", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || !slices.Equal([]string(hc.CapDrop), []string{"ALL"}) {
		t.Errorf("security: opts %v, cap drop %v", hc.SecurityOpt, hc.CapDrop)
	}
	if string(hc.NetworkMode) != "none" {
		t.Errorf("network mode %q, want none", hc.NetworkMode)
	}

	// What a process inside actually gets.
	status := string(execOut(t, m, tenant, "limits", "cat", "/proc/self/status").Stdout)
	if !strings.Contains(status, "NoNewPrivs:\t1") {
		t.Errorf("NoNewPrivs is not set inside:\n%s", status)
	}
	bnd := capField(t, status, "CapBnd")
	for name, bit := range map[string]uint{"SYS_PTRACE": 19, "KILL": 5, "CHOWN": 0} {
		if bnd&(1<<bit) == 0 {
			t.Errorf("capability %s missing inside (CapBnd %#x)", name, bnd)
		}
	}
	for name, bit := range map[string]uint{"NET_RAW": 13, "SYS_ADMIN": 21, "NET_ADMIN": 12, "MKNOD": 27, "SYS_MODULE": 16} {
		if bnd&(1<<bit) != 0 {
			t.Errorf("capability %s present inside (CapBnd %#x)", name, bnd)
		}
	}
	// The agent binary is mounted read-only.
	res := execOut(t, m, tenant, "limits", "sh", "-c", "echo x >> "+AgentPath)
	if res.ExitCode == 0 {
		t.Error("the agent binary inside the sandbox is writable")
	}
	if pid1 := string(execOut(t, m, tenant, "limits", "cat", "/proc/1/cmdline").Stdout); !strings.HasPrefix(pid1, AgentPath+"\x00init") {
		t.Errorf("PID 1 is %q, want the agent's init", pid1)
	}
}

func capField(t *testing.T, status, field string) uint64 {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func TestMissingImageIsClear(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	_, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "noimg", Image: "sandboxd-no-such-image:never"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "sandboxd-no-such-image:never") || !strings.Contains(err.Error(), "make images") {
		t.Fatalf("Create with a missing image = %v, want failed_precondition naming it and `make images`", err)
	}
}

func TestHostWorkspaceBindMount(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	m, tenant := startManager(t, b)
	ws := t.TempDir()
	if err := os.WriteFile(path.Join(ws, "from-host.txt"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "bind", HostWorkspace: ws}); err != nil {
		t.Fatal(err)
	}
	if out := string(execOut(t, m, tenant, "bind", "cat", Workspace+"/from-host.txt").Stdout); out != "host" {
		t.Errorf("the sandbox reads %q from the host workspace", out)
	}
	execOut(t, m, tenant, "bind", "sh", "-c", "echo sandbox > "+Workspace+"/from-sandbox.txt")
	if data, err := os.ReadFile(path.Join(ws, "from-sandbox.txt")); err != nil || string(data) != "sandbox\n" {
		t.Errorf("the host sees %q, %v", data, err)
	}
}

// A container made elsewhere (by a sandboxd from before deployments) that
// carries our labels but no deployment: adopted by the deployment that is
// configured to, and nobody's otherwise.
func TestAdoptContainerMadeElsewhere(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t, WithDeployment(sandbox.Deployment{Name: "adopter-" + newID(), AdoptUnlabelled: true}))
	other := newTestBackend(t, WithDeployment(sandbox.Deployment{Name: "other-" + newID()}))
	tenant := "dt-" + newID()
	t.Cleanup(func() { removeTenant(t, b.cli, tenant) })
	name := "adopt-test-" + newID()
	created, err := b.cli.ContainerCreate(ctx(t), &container.Config{
		Image: testImage,
		Cmd:   []string{"sleep", "infinity"},
		Labels: map[string]string{
			sandbox.LabelManaged: "true", sandbox.LabelTenant: tenant, sandbox.LabelConversation: "adopted",
		},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cli.ContainerStart(ctx(t), created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := other.Unlabelled(ctx(t)); err != nil || n < 1 {
		t.Errorf("Unlabelled = %d, %v; want at least the one made here", n, err)
	}
	// A deployment that does not adopt unlabelled sandboxes leaves it alone.
	mo := sandbox.NewManager(other)
	if err := mo.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	if _, err := mo.Lookup(ctx(t), tenant, "adopted"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup by a deployment that does not adopt = %v, want not_found", err)
	}
	if err := mo.Delete(ctx(t), tenant, created.ID[:12]); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete by a deployment that does not adopt = %v, want not_found", err)
	}
	// A Manager started afterwards (a restarted sandboxd) finds it.
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Lookup(ctx(t), tenant, "adopted")
	if err != nil || info.ID != created.ID[:12] {
		t.Fatalf("Lookup of an adopted container = %+v, %v; want id %s", info, err, created.ID[:12])
	}
	res := execOut(t, m, tenant, "adopted", "echo", "adopted")
	if string(res.Stdout) != "adopted\n" {
		t.Fatalf("exec in the adopted container = %+v", res)
	}
	// A second pipe reuses the copied agent (and its daemon).
	res = execOut(t, m, tenant, "adopted", "sh", "-c", "ls "+AdoptedAgentDir+" | wc -l")
	if strings.TrimSpace(string(res.Stdout)) != "1" {
		t.Errorf("%s holds %q entries, want one agent", AdoptedAgentDir, res.Stdout)
	}
	if err := m.Delete(ctx(t), tenant, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.ContainerInspect(ctx(t), created.ID); err == nil {
		t.Error("Delete left the adopted container")
	}
}

func TestUnreachableEngine(t *testing.T) {
	needDocker(t)
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	b := newTestBackend(t, WithClient(cli))
	m := sandbox.NewManager(b)
	if err := m.Start(ctx(t)); err != nil {
		t.Fatalf("Start with the engine away = %v, want nil (it retries)", err)
	}
	defer m.Close()
	_, err = m.Create(ctx(t), sandbox.Spec{Tenant: "t", Conversation: "c1"})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("Create with the engine away = %v, want unavailable saying it cannot be reached", err)
	}
	if err := m.Ping(ctx(t)); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Ping = %v, want unavailable", err)
	}
}

func TestPools(t *testing.T) {
	needDocker(t)
	sandboxtest.RunPools(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		return newTestBackend(t, WithDeployment(d))
	}, sandboxtest.WithImage(testImage))
}

// Of racing claims of one pool sandbox (replicas on one engine), exactly
// one wins, and its owner is what every reader sees; Remove takes the
// claim record along.
func TestClaimRaceHasOneWinner(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t, WithDeployment(sandbox.Deployment{Name: "claim-" + newID()}))
	warm, err := b.Create(ctx(t), sandbox.Spec{Image: testImage, Pool: sandbox.PoolKey(testImage)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), warm.ID) })
	if warm.Tenant != "" || warm.Conversation != "" {
		t.Fatalf("pool sandbox = %+v, want no owner", warm)
	}
	const n = 6
	errs := make(chan error, n)
	won := make(chan sandbox.Info, n)
	for i := range n {
		go func() {
			info, err := b.Claim(ctx(t), warm, sandbox.Owner{Tenant: "t" + strconv.Itoa(i), Conversation: "c"})
			if err == nil {
				won <- info
			}
			errs <- err
		}()
	}
	wins := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			wins++
		case !errors.Is(err, errdefs.ErrConflict):
			t.Errorf("a losing claim = %v, want conflict", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d claims won, want 1", wins)
	}
	winner := <-won
	for name, get := range map[string]func() (sandbox.Info, error){
		"Inspect": func() (sandbox.Info, error) { return b.Inspect(ctx(t), warm.ID) },
		"List": func() (sandbox.Info, error) {
			infos, err := b.List(ctx(t))
			for _, i := range infos {
				if i.ID == warm.ID {
					return i, err
				}
			}
			return sandbox.Info{}, err
		},
	} {
		if got, err := get(); err != nil || got.Tenant != winner.Tenant || got.Conversation != "c" {
			t.Errorf("%s after the race = %s/%s, %v; want the winner %s", name, got.Tenant, got.Conversation, err, winner.Tenant)
		}
	}
	if err := b.Remove(ctx(t), warm.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.VolumeInspect(ctx(t), claimVolume(warm.ID)); err == nil {
		t.Errorf("the claim record %s outlived its sandbox", claimVolume(warm.ID))
	}
}
