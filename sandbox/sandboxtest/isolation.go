package sandboxtest

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/sandbox"
)

// WithIsolation runs the cases that check, from inside a sandbox, what an
// isolating backend promises: the CPU and memory limits asked for, and no
// network but loopback by default. The host backend promises neither.
func WithIsolation() Option { return func(c *config) { c.isolated = true } }

// sh runs script with sh -c in the sandbox; stdout and stderr together.
func sh(t *testing.T, c *agent.Client, script string) (string, int) {
	t.Helper()
	r, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", script + " 2>&1"}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return strings.TrimSpace(string(r.Stdout)), r.ExitCode
}

// limitsApplied reads the cgroup limits (v2, else v1) the kernel enforces.
func (s *suite) limitsApplied(t *testing.T) {
	if !s.cfg.isolated {
		t.Skip("this backend applies no resource limits")
	}
	m := s.manager(t)
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-limits", Image: s.cfg.image, Runtime: s.cfg.runtime,
		Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 300}}); err != nil {
		t.Fatal(err)
	}
	c, _ := s.agent(t, m, "c-limits")
	if s.cfg.runtime == sandbox.RuntimeGVisor {
		// gVisor's kernel shows no host cgroup inside; it reports the
		// memory limit as the machine's memory, and the CPU quota is
		// enforced on its host processes, out of sight.
		mem, _ := sh(t, c, "grep MemTotal /proc/meminfo")
		if f := strings.Fields(mem); len(f) != 3 || f[1] != strconv.Itoa(300<<10) {
			t.Errorf("memory inside the gVisor sandbox = %q, want %d kB (300 MiB)", mem, 300<<10)
		}
		return
	}
	mem, _ := sh(t, c, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if mem != strconv.Itoa(300<<20) {
		t.Errorf("memory limit inside the sandbox = %q, want %d (300 MiB)", mem, 300<<20)
	}
	cpu, _ := sh(t, c, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
	if f := strings.Fields(cpu); len(f) != 2 || f[1] == "0" || ratio(f[0], f[1]) != 0.5 {
		t.Errorf("cpu quota inside the sandbox = %q, want half of the period (0.5 CPU)", cpu)
	}
}

func ratio(a, b string) float64 {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || y == 0 {
		return -1
	}
	return x / y
}

// networkDenied: a sandbox made without a network has no interface up but
// loopback, no route, and a connection to this machine's own address fails
// at once as unreachable. The address never leaves the machine, whatever
// the outcome.
func (s *suite) networkDenied(t *testing.T) {
	if !s.cfg.isolated {
		t.Skip("this backend does not isolate the network")
	}
	m := s.manager(t)
	s.create(t, m, "c-net")
	c, _ := s.agent(t, m, "c-net")

	if s.cfg.runtime == sandbox.RuntimeGVisor {
		// gVisor's sysfs has no interface flags; its /proc/net/dev lists
		// the interfaces its network stack has.
		devs, _ := sh(t, c, `tail -n +3 /proc/net/dev | cut -d: -f1`)
		if got := strings.Fields(devs); !slices.Equal(got, []string{"lo"}) {
			t.Errorf("interfaces in a gVisor sandbox without a network: %q, want lo alone", got)
		}
	} else {
		s.linksDown(t, c)
	}
	routes, _ := sh(t, c, "cat /proc/net/route")
	if lines := strings.Split(routes, "\n"); len(lines) > 1 {
		t.Errorf("IPv4 routes in a sandbox without a network:\n%s", routes)
	}
	host := machineAddress(t)
	out, code := sh(t, c, "timeout 10 bash -c 'exec 3<>/dev/tcp/"+host+"/9'")
	// Linux says the network is unreachable; gVisor's stack, that there is
	// no route to the host: both refuse at once, without a packet sent.
	want := "unreachable"
	if s.cfg.runtime == sandbox.RuntimeGVisor {
		want = "no route to host"
	}
	if code == 0 || !strings.Contains(strings.ToLower(out), want) {
		t.Errorf("connecting to this machine's %s from the sandbox: exit %d %q, want %s", host, code, out, want)
	}
}

// linksDown checks that no interface but lo is up (their sysfs flags).
func (s *suite) linksDown(t *testing.T, c *agent.Client) {
	t.Helper()
	links, _ := sh(t, c, `for f in /sys/class/net/*; do echo "${f##*/} $(cat $f/flags)"; done`)
	for _, l := range strings.Split(links, "\n") {
		name, flags, _ := strings.Cut(l, " ")
		v, err := strconv.ParseUint(strings.TrimPrefix(flags, "0x"), 16, 32)
		if err != nil {
			t.Fatalf("cannot read the flags of %q from %q", name, l)
		}
		if name != "lo" && v&0x1 != 0 {
			t.Errorf("interface %s is up in a sandbox without a network (flags %s)", name, flags)
		}
	}
}

// machineAddress is this machine's first non-loopback IPv4 address.
func machineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to aim at")
	return ""
}
