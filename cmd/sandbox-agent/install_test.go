package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
	if out, err := exec.Command("unshare", "-n", "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1").CombinedOutput(); err != nil {
		t.Skipf("this machine cannot make a network namespace with a veth pair: %v %s", err, out)
	}
	out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// A namespace with a veth pair up, like a pod's eth0: install --links-down
// copies the agent and leaves only loopback up, with no route out.
func TestInstallLinksDownLeavesOnlyLoopback(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "sandbox-agent")
	out, err := netns(t, `set -e
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 10.250.0.2/24 dev v0
ip link set v0 up
ip link set v1 up
ip route add default via 10.250.0.1
`+binary+` install --links-down `+dest+`
`+dest+` version
echo "--links"
ip -o link show up
echo "--routes"
ip -4 route show
`)
	if err != nil {
		t.Fatalf("install --links-down in a fresh namespace: %v\n%s", err, out)
	}
	if !strings.Contains(out, "took v0, v1 down") && !strings.Contains(out, "took v1, v0 down") {
		t.Errorf("install --links-down did not report both veth ends:\n%s", out)
	}
	if !strings.Contains(out, "sandbox-agent dev (protocol") {
		t.Errorf("the installed copy does not run:\n%s", out)
	}
	links := out[strings.Index(out, "--links"):strings.Index(out, "--routes")]
	if strings.Contains(links, "v0") || strings.Contains(links, "v1") || !strings.Contains(links, "lo:") {
		t.Errorf("after install --links-down the links up are:\n%s\nwant only lo", links)
	}
	if routes := strings.TrimSpace(out[strings.Index(out, "--routes")+len("--routes"):]); routes != "" {
		t.Errorf("after install --links-down routes are left:\n%s", routes)
	}
}

// Without NET_ADMIN it fails with an error message that names the capability.
func TestInstallLinksDownWithoutNetAdminSaysSo(t *testing.T) {
	if _, err := exec.LookPath("capsh"); err != nil {
		t.Skip("needs capsh (libcap2-bin) to drop NET_ADMIN")
	}
	out, err := netns(t, `ip link add v0 type veth peer name v1 && ip link set v0 up &&
capsh --drop=cap_net_admin -- -c '`+binary+` install --links-down `+filepath.Join(t.TempDir(), "a")+`'`)
	if err == nil || !strings.Contains(out, "needs the NET_ADMIN capability") {
		t.Fatalf("install --links-down without NET_ADMIN = %v\n%s\nwant a failure naming NET_ADMIN", err, out)
	}
}

// Without --links-down it only copies: an executable, identical copy, and
// nothing else left in the directory.
func TestInstallCopiesItself(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "sandbox-agent")
	if out, err := exec.Command(binary, "install", dest).CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(binary)
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs from the binary (%d vs %d bytes, %v)", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o755 {
		t.Errorf("the copy has mode %v, want 0755", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries after install, want only the agent", len(ents))
	}
	for _, args := range [][]string{{"install"}, {"install", "a", "b"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "usage: sandbox-agent install") {
			t.Errorf("%v = %v, %s; want the usage", args, err, out)
		}
	}
	out, err := exec.Command(binary, "install", filepath.Join(dir, "missing", "x")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot write beside") {
		t.Errorf("install into a missing directory = %v, %s; want it said", err, out)
	}
}
