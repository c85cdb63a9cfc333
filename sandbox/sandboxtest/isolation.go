package sandboxtest

import (
	"net"
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
	if _, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-limits", Image: s.cfg.image,
		Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 300}}); err != nil {
		t.Fatal(err)
	}
	c, _ := s.agent(t, m, "c-limits")
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
	routes, _ := sh(t, c, "cat /proc/net/route")
	if lines := strings.Split(routes, "\n"); len(lines) > 1 {
		t.Errorf("IPv4 routes in a sandbox without a network:\n%s", routes)
	}
	host := machineAddress(t)
	out, code := sh(t, c, "timeout 10 bash -c 'exec 3<>/dev/tcp/"+host+"/9'")
	if code == 0 || !strings.Contains(strings.ToLower(out), "unreachable") {
		t.Errorf("connecting to this machine's %s from the sandbox: exit %d %q, want network unreachable", host, code, out)
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
