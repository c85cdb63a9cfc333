package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netns runs script with sh in a network namespace of its own (unshare -n),
// so the test's interfaces never touch the machine's.
func netns(t *testing.T, script string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// A namespace with a veth pair up, like a pod's eth0: netdown leaves only
// loopback up, and a connection out fails at once as unreachable.
func TestNetDownLeavesOnlyLoopback(t *testing.T) {
	out, err := netns(t, `set -e
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 10.250.0.2/24 dev v0
ip link set v0 up
ip link set v1 up
ip route add default via 10.250.0.1
`+binary+` netdown
echo "--links"
ip -o link show up
echo "--routes"
ip -4 route show
`)
	if err != nil {
		t.Fatalf("netdown in a fresh namespace: %v\n%s", err, out)
	}
	if !strings.Contains(out, "took v0, v1 down") && !strings.Contains(out, "took v1, v0 down") {
		t.Errorf("netdown did not report both veth ends:\n%s", out)
	}
	links := out[strings.Index(out, "--links"):strings.Index(out, "--routes")]
	if strings.Contains(links, "v0") || strings.Contains(links, "v1") || !strings.Contains(links, "lo:") {
		t.Errorf("after netdown the links up are:\n%s\nwant only lo", links)
	}
	if routes := strings.TrimSpace(out[strings.Index(out, "--routes")+len("--routes"):]); routes != "" {
		t.Errorf("after netdown routes are left:\n%s", routes)
	}
}

// Without NET_ADMIN it fails with a sentence that names the capability.
func TestNetDownWithoutNetAdminSaysSo(t *testing.T) {
	if _, err := exec.LookPath("capsh"); err != nil {
		t.Skip("needs capsh (libcap2-bin) to drop NET_ADMIN")
	}
	out, err := netns(t, `ip link add v0 type veth peer name v1 && ip link set v0 up &&
capsh --drop=cap_net_admin -- -c '`+binary+` netdown'`)
	if err == nil || !strings.Contains(out, "needs the NET_ADMIN capability") {
		t.Fatalf("netdown without NET_ADMIN = %v\n%s\nwant a failure naming NET_ADMIN", err, out)
	}
}

func TestNetDownRefusesArguments(t *testing.T) {
	out, err := exec.Command(binary, "netdown", "eth0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "takes no arguments") {
		t.Fatalf("netdown eth0 = %v, %s; want a usage error", err, out)
	}
}
