package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// Cluster tests run against a real cluster when SANDBOXD_TEST_KUBERNETES=1
// and KUBECONFIG names it (scripts/k8s-up.sh makes one and writes both, with
// SANDBOXD_TEST_K8S_AGENT_IMAGE, into /var/lib/sandboxd-k8s/env). The
// images must already be on the node: pods use imagePullPolicy Never.

func clusterImages() (sandboxImg, agentImg string) {
	sandboxImg, agentImg = "sandboxd-sandbox:latest", DefaultAgentImage
	if v := os.Getenv("SANDBOXD_TEST_IMAGE"); v != "" {
		sandboxImg = v
	}
	if v := os.Getenv("SANDBOXD_TEST_K8S_AGENT_IMAGE"); v != "" {
		agentImg = v
	}
	return sandboxImg, agentImg
}

// newClusterBackend returns a Backend in a fresh namespace that is deleted
// (with every pod left in it) when the test ends.
func newClusterBackend(t testing.TB, opts ...Option) (*Backend, kubernetes.Interface) {
	t.Helper()
	b, cs, _ := newClusterBackends(t, opts...)
	return b, cs
}

// newClusterBackends is newClusterBackend, and a func that makes more
// Backends in the same namespace (other deployments).
func newClusterBackends(t testing.TB, opts ...Option) (*Backend, kubernetes.Interface, func(...Option) *Backend) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh) to run against a cluster")
	}
	cfg, _, err := LoadConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	ns := "sandboxd-test-" + hex.EncodeToString(rb[:])
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	img, agentImg := clusterImages()
	newIn := func(opts ...Option) *Backend {
		b, err := New(append([]Option{
			WithClientset(cs, cfg), WithNamespace(ns),
			WithDefaultImage(img), WithAgentImage(agentImg), WithImagePullPolicy(corev1.PullNever),
			// A 2-core test node holds every sandbox of the suite at once.
			WithDefaultResources(sandbox.Resources{CPUs: 1, MemoryMB: 1024}),
			WithRequests(sandbox.Resources{CPUs: 0.02, MemoryMB: 32}),
			WithStartTimeout(2 * time.Minute),
		}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return newIn(opts...), cs, newIn
}

func TestClusterSuite(t *testing.T) {
	var b *Backend
	var more func(opts ...Option) *Backend
	img, _ := clusterImages()
	sandboxtest.Run(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		if b == nil {
			b, _, more = newClusterBackends(t, WithDeployment(d))
			return b
		}
		return more(WithDeployment(d)) // another deployment in the same namespace
	},
		sandboxtest.WithImage(img), sandboxtest.WithIsolation(),
		sandboxtest.WithStopper(func(ctx context.Context, id string) error { return stopAgent(ctx, b, id) }))
}

// stopAgent makes the sandbox's PID 1 (sandbox-agent init) exit, as
// `docker stop` would: the pod then ends (restartPolicy Never).
func stopAgent(ctx context.Context, b *Backend, id string) error {
	// The exec may be cut when the container it runs in stops.
	_ = b.Exec(ctx, id, []string{"sh", "-c", "kill -TERM 1"}, nil, nil, nil)
	for {
		info, err := b.Inspect(ctx, id)
		if err != nil {
			return err
		}
		if info.State == sandbox.StateStopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s still %s after its agent was told to stop", id, info.State)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A pod deleted with the API (kubectl delete pod) while its pipe is open:
// the pipe ends and the next call says the sandbox was removed outside.
func TestClusterPodDeletedBehindOurBack(t *testing.T) {
	b, cs := newClusterBackend(t)
	m := sandbox.NewManager(b)
	ctx := clusterCtx(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "conv:deleted"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "conv:deleted")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(b.Namespace()).Delete(ctx, b.PodName(info.ID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the agent pipe did not end within 30s of the pod's deletion")
	}
	_, _, err = m.Agent(ctx, "acme", "conv:deleted")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "outside sandboxd") {
		t.Fatalf("Agent after the pod was deleted = %v, want not_found saying it was removed outside sandboxd", err)
	}
}

// What the kernel enforces inside a sandbox pod, read from inside it.
func TestClusterLimitsAndSecurityApplied(t *testing.T) {
	b, cs := newClusterBackend(t, WithNetworkPolicy(true))
	m := sandbox.NewManager(b)
	ctx := clusterCtx(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c-limits", Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 300}})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Agent(ctx, "acme", "c-limits")
	if err != nil {
		t.Fatal(err)
	}
	sh := func(script string) (string, int) {
		t.Helper()
		r, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", script}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return strings.TrimSpace(string(r.Stdout)), r.ExitCode
	}

	status, _ := sh("cat /proc/self/status")
	field := func(name string) string {
		for _, l := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if field("NoNewPrivs") != "1" {
		t.Errorf("NoNewPrivs = %q, want 1 (allowPrivilegeEscalation false)", field("NoNewPrivs"))
	}
	if field("Seccomp") != "2" {
		t.Errorf("Seccomp = %q, want 2 (a filter: RuntimeDefault)", field("Seccomp"))
	}
	// CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, FSETID 4, KILL 5, SETGID 6, SETUID 7, SYS_PTRACE 19.
	want := uint64(1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<19)
	if got, err := strconv.ParseUint(field("CapEff"), 16, 64); err != nil || got != want {
		t.Errorf("CapEff = %s, want %016x (ALL dropped, the Docker backend's set added)", field("CapEff"), want)
	}

	mem, _ := sh("cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if mem != strconv.Itoa(300<<20) {
		t.Errorf("memory limit = %q, want %d", mem, 300<<20)
	}
	cpu, _ := sh("cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
	if cpu != "50000 100000" {
		t.Errorf("cpu quota = %q, want \"50000 100000\" (half a CPU)", cpu)
	}
	if _, code := sh("test -e /var/run/secrets/kubernetes.io/serviceaccount/token"); code == 0 {
		t.Error("the service-account token is mounted in the sandbox")
	}
	if out, code := sh("touch /opt/sandboxd/bin/x 2>&1"); code == 0 || !strings.Contains(out, "Read-only") {
		t.Errorf("writing beside the agent: exit %d %q, want a read-only file system", code, out)
	}
	if out, code := sh("echo ok > /workspace/f && cat /workspace/f"); code != 0 || out != "ok" {
		t.Errorf("the workspace is not writable: exit %d %q", code, out)
	}

	p, err := cs.CoreV1().Pods(b.Namespace()).Get(ctx, b.PodName(info.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server accepted the isolating policy, and it selects the pod.
	pol, err := cs.NetworkingV1().NetworkPolicies(b.Namespace()).Get(ctx, NetworkPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the NetworkPolicy was not created: %v", err)
	}
	for k, v := range pol.Spec.PodSelector.MatchLabels {
		if p.Labels[k] != v {
			t.Errorf("the NetworkPolicy selects %s=%s, the pod has %q", k, v, p.Labels[k])
		}
	}
	if p.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class = %s, want Burstable (requests below limits)", p.Status.QOSClass)
	}

	// One fresh exec through the API server, beside the pipe: a clean byte
	// stream both ways, no TTY.
	var out, errOut bytes.Buffer
	if err := b.Exec(ctx, info.ID, []string{"sh", "-c", "cat; test -t 0 || echo notty >&2"}, strings.NewReader("bytes\x00\x01\n"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if out.String() != "bytes\x00\x01\n" || strings.TrimSpace(errOut.String()) != "notty" {
		t.Errorf("exec stdout %q stderr %q, want the bytes back and no TTY", out.String(), errOut.String())
	}
}

// On a CNI that enforces no NetworkPolicy (the test cluster's bridge), a
// network "none" sandbox is still cut off by its downed links: the pod
// network's gateway, which a bridge sandbox reaches (connection refused:
// nothing listens there), is unreachable from it.
func TestClusterNetworkNoneCutOffOnAnyCNI(t *testing.T) {
	b, _ := newClusterBackend(t)
	m := sandbox.NewManager(b)
	ctx := clusterCtx(t)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sh := func(conv, script string) (string, int) {
		t.Helper()
		c, _, err := m.Agent(ctx, "acme", conv)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", script + " 2>&1"}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return strings.TrimSpace(string(r.Stdout)), r.ExitCode
	}
	for conv, network := range map[string]string{"c-bridge": "bridge", "c-none": "none"} {
		if _, err := m.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: conv, Network: network}); err != nil {
			t.Fatal(err)
		}
	}
	routes, _ := sh("c-bridge", "cat /proc/net/route")
	gw := defaultGateway(routes)
	if gw == "" {
		t.Fatalf("the bridge sandbox has no default route:\n%s", routes)
	}
	dial := "timeout 10 bash -c 'exec 3<>/dev/tcp/" + gw + "/9'"
	if out, code := sh("c-bridge", dial); code == 0 || !strings.Contains(strings.ToLower(out), "refused") {
		t.Fatalf("the bridge sandbox dialing its gateway %s: exit %d %q, want connection refused (reachable)", gw, code, out)
	}
	if out, code := sh("c-none", dial); code == 0 || !strings.Contains(strings.ToLower(out), "unreachable") {
		t.Errorf("the none sandbox dialing %s: exit %d %q, want network unreachable", gw, code, out)
	}
}

// defaultGateway reads the default route's gateway from /proc/net/route
// (little-endian hex), or "".
func defaultGateway(routes string) string {
	for _, l := range strings.Split(routes, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		return fmt.Sprintf("%d.%d.%d.%d", v&0xff, v>>8&0xff, v>>16&0xff, v>>24)
	}
	return ""
}

func TestClusterPools(t *testing.T) {
	var more func(opts ...Option) *Backend
	img, _ := clusterImages()
	sandboxtest.RunPools(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		if more == nil {
			b, _, m := newClusterBackends(t, WithDeployment(d))
			more = m
			return b
		}
		return more(WithDeployment(d)) // a replica, or another deployment, in the same namespace
	}, sandboxtest.WithImage(img))
}
