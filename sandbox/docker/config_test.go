package docker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxd/sandboxd/sandbox"
)

func TestContainerConfig(t *testing.T) {
	b := &Backend{agentPath: "/usr/lib/sandboxd/sandbox-agent", caps: append(DefaultCaps, "NET_BIND_SERVICE"), defaults: DefaultResources,
		dep: sandbox.Deployment{Name: "prod-eu"}}
	cfg, hc := b.containerConfig("abc123abc123", "img:1", sandbox.Spec{
		Tenant: "acme", Conversation: "c1", Env: map[string]string{"B": "2", "A": "1"},
		Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 512},
	})
	if got := cfg.Entrypoint; !slices.Equal(got, []string{AgentPath, "init"}) {
		t.Errorf("entrypoint = %q, want the agent's init", got)
	}
	if cfg.Labels[sandbox.LabelManaged] != "true" || cfg.Labels[sandbox.LabelTenant] != "acme" || cfg.Labels[sandbox.LabelConversation] != "c1" || cfg.Labels[sandbox.LabelCreatedAt] == "" ||
		cfg.Labels[sandbox.LabelDeployment] != "prod-eu" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	if !slices.Equal(cfg.Env, []string{"A=1", "B=2"}) {
		t.Errorf("env = %q, want sorted A=1 B=2", cfg.Env)
	}
	if hc.NetworkMode != "none" {
		t.Errorf("network = %q, want none by default", hc.NetworkMode)
	}
	if hc.NanoCPUs != 1_500_000_000 || hc.Memory != 512<<20 || hc.PidsLimit == nil || *hc.PidsLimit != DefaultResources.Pids {
		t.Errorf("limits = cpus %d, memory %d, pids %v; want 1.5e9, 512 MiB, the default pids", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.CapAdd, "SYS_PTRACE") || !slices.Contains(hc.CapAdd, "NET_BIND_SERVICE") || slices.Contains(hc.CapAdd, "SYS_ADMIN") {
		t.Errorf("caps: drop %v, add %v", hc.CapDrop, hc.CapAdd)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("security options %v lack no-new-privileges", hc.SecurityOpt)
	}
	agent, ws := hc.Mounts[0], hc.Mounts[1]
	if agent.Type != mount.TypeBind || agent.Source != b.agentPath || agent.Target != AgentPath || !agent.ReadOnly {
		t.Errorf("agent mount = %+v, want a read-only bind", agent)
	}
	if ws.Type != mount.TypeVolume || ws.Source != "" || ws.Target != Workspace {
		t.Errorf("workspace mount = %+v, want an anonymous volume", ws)
	}

	_, hc = b.containerConfig("abc123abc123", "img:1", sandbox.Spec{Network: "bridge", HostWorkspace: "/srv/co"})
	if hc.NetworkMode != "bridge" {
		t.Errorf("network = %q, want bridge when asked", hc.NetworkMode)
	}
	if ws := hc.Mounts[1]; ws.Type != mount.TypeBind || ws.Source != "/srv/co" || ws.ReadOnly {
		t.Errorf("host workspace mount = %+v, want a writable bind of /srv/co", ws)
	}
	if hc.NanoCPUs != int64(DefaultResources.CPUs*1e9) || hc.Memory != DefaultResources.MemoryMB<<20 {
		t.Errorf("zero resources did not take the defaults: %d, %d", hc.NanoCPUs, hc.Memory)
	}
	if cfg.Labels[sandbox.LabelSetuid] != "" {
		t.Errorf("a sandbox without Setuid is labelled %s", sandbox.LabelSetuid)
	}

	// Setuid drops no-new-privileges and nothing else.
	cfg, hc = b.containerConfig("abc123abc123", "img:1", sandbox.Spec{Setuid: true})
	if slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || !slices.Equal(hc.CapDrop, []string{"ALL"}) || slices.Contains(hc.CapAdd, "SYS_ADMIN") {
		t.Errorf("Setuid: security options %v, caps drop %v add %v; want no no-new-privileges and the same caps", hc.SecurityOpt, hc.CapDrop, hc.CapAdd)
	}
	if !sandbox.SetuidOf(sandbox.Info{Labels: cfg.Labels}) {
		t.Errorf("Setuid is not in the labels %v", cfg.Labels)
	}
}

func TestInfoNamingAndState(t *testing.T) {
	labels := map[string]string{sandbox.LabelTenant: "acme", sandbox.LabelConversation: "c1", sandbox.LabelCreatedAt: "2026-01-02T03:04:05Z"}
	cid := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct{ name, state, wantID, wantState string }{
		{"/sandboxd-aaaabbbbcccc", "running", "aaaabbbbcccc", sandbox.StateRunning},
		{"/sandboxd-aaaabbbbcccc", "exited", "aaaabbbbcccc", sandbox.StateStopped},
		{"/sandboxd-aaaabbbbcccc", "paused", "aaaabbbbcccc", sandbox.StatePaused},
		{"/sandboxd-aaaabbbbcccc", "removing", "aaaabbbbcccc", sandbox.StateGone},
		{"/someone-else", "running", cid[:12], sandbox.StateRunning},
		{"/sandboxd-Not_Ours!", "created", cid[:12], sandbox.StateStopped},
	} {
		i := info(cid, tc.name, "img", mapState(tc.state, 0), time.Time{}, labels)
		if i.ID != tc.wantID || i.State != tc.wantState || i.Tenant != "acme" || i.CreatedAt.Year() != 2026 {
			t.Errorf("info(%s, %s) = %+v; want id %s, state %s", tc.name, tc.state, i, tc.wantID, tc.wantState)
		}
	}
	if got := mapState("exited", sandbox.ExitHibernated); got != sandbox.StateHibernated {
		t.Errorf("a container whose init exited with the hibernation's status is %s, want hibernated", got)
	}
	if got := exitCodeOf("Exited (75) 3 minutes ago"); got != 75 {
		t.Errorf("the exit status of a listed container: %d, want 75", got)
	}
	for _, id := range []string{"", "../x", "A", "sandboxd-x", strings.Repeat("a", 65)} {
		if validID(id) {
			t.Errorf("validID(%q) = true", id)
		}
	}
}

func TestContainerConfigRuntimeAndReadOnlyRoot(t *testing.T) {
	b := &Backend{agentPath: "/a", caps: DefaultCaps, defaults: DefaultResources, gvisorRuntime: DefaultGVisorRuntime}
	cfg, hc := b.containerConfig("abc123abc123", "img:1", sandbox.Spec{Tenant: "t", Conversation: "c"})
	if hc.Runtime != "" || hc.ReadonlyRootfs || len(hc.Tmpfs) != 0 || cfg.Labels[sandbox.LabelRuntime] != "runc" || cfg.Labels[sandbox.LabelReadOnlyRoot] != "" {
		t.Errorf("default: runtime %q, read-only %v, tmpfs %v, labels %v; want the engine's default runtime, a writable root, runc labelled", hc.Runtime, hc.ReadonlyRootfs, hc.Tmpfs, cfg.Labels)
	}
	cfg, hc = b.containerConfig("abc123abc123", "img:1", sandbox.Spec{Tenant: "t", Conversation: "c", Runtime: sandbox.RuntimeGVisor, ReadOnlyRoot: true})
	if hc.Runtime != "runsc" || cfg.Labels[sandbox.LabelRuntime] != "gvisor" {
		t.Errorf("gvisor: engine runtime %q, label %q; want runsc, gvisor", hc.Runtime, cfg.Labels[sandbox.LabelRuntime])
	}
	if want := DefaultResources.Pids + GVisorPidsAllowance; hc.PidsLimit == nil || *hc.PidsLimit != want {
		t.Errorf("gvisor: engine pids limit %v, want the default and gVisor's allowance, %d", hc.PidsLimit, want)
	}
	if !hc.ReadonlyRootfs || hc.Tmpfs["/tmp"] == "" || cfg.Labels[sandbox.LabelReadOnlyRoot] != "true" {
		t.Errorf("read-only root: %v, tmpfs %v, label %q", hc.ReadonlyRootfs, hc.Tmpfs, cfg.Labels[sandbox.LabelReadOnlyRoot])
	}
	if home := hc.Mounts[len(hc.Mounts)-1]; home.Type != mount.TypeVolume || home.Target != Home || home.ReadOnly {
		t.Errorf("home mount %+v, want a writable anonymous volume at %s", home, Home)
	}
	_, hc = b.containerConfig("abc123abc123", "img:1", sandbox.Spec{Runtime: sandbox.RuntimeGVisor, Resources: sandbox.Resources{Pids: 128}})
	if want := 128 + int64(GVisorPidsAllowance); hc.PidsLimit == nil || *hc.PidsLimit != want {
		t.Errorf("gvisor with pids 128: engine pids limit %v, want %d", hc.PidsLimit, want)
	}
}
