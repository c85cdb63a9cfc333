// Command kubelifecyclebench measures the lifecycle of sandboxes with a
// workspace claim on Kubernetes, through the Manager, and rewrites the
// lifecycle-kubernetes section of BENCHMARKS.md:
//
//   - a cold create (claim and pod) until the first agent call answered;
//   - hibernate (the agent records its processes, the pod is deleted, the
//     claim kept) and resume (a new pod on the claim) until the first call;
//   - a snapshot of a workspace holding a file of random bytes (streamed
//     from the pod into a claim of its own), a sandbox made from it until
//     its first call, and a fork into several copies.
//
// Run from the repository root with a cluster up (scripts/k8s-up.sh):
//
//	. /var/lib/sandboxd-k8s/env && go run ./cmd/kubelifecyclebench [-out BENCHMARKS.md] [--smoke]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
)

type flags struct {
	image, agentImage, class string
	out                      string
	rounds, copies           int
	sizeMiB                  int
	smoke                    bool
}

func main() {
	var f flags
	flag.StringVar(&f.image, "image", "sandboxd-sandbox:latest", "sandbox image, imported into the node")
	flag.StringVar(&f.agentImage, "agent-image", bench.EnvOr("SANDBOXD_TEST_K8S_AGENT_IMAGE", kubernetes.DefaultAgentImage), "image carrying sandbox-agent, imported into the node")
	flag.StringVar(&f.class, "storage-class", os.Getenv("SANDBOXD_TEST_K8S_STORAGE_CLASS"), "storage class of the workspace claims")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose lifecycle-kubernetes section is rewritten; empty prints it")
	flag.IntVar(&f.rounds, "rounds", 5, "samples of each figure")
	flag.IntVar(&f.copies, "copies", 3, "copies of one fork")
	flag.IntVar(&f.sizeMiB, "size", 100, "MiB of random bytes in the snapshotted workspace")
	flag.BoolVar(&f.smoke, "smoke", false, "one of each with 1 MiB; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.rounds, f.copies, f.sizeMiB = 1, 2, 1
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "kubelifecyclebench:", err)
		os.Exit(1)
	}
}

// figures are the samples of one run.
type figures struct {
	cold, hibernate, resume, snapshot, restore, fork []time.Duration
	snapBytes                                        int64
}

const tenant = "bench"

func run(f flags) error {
	if os.Getenv("KUBECONFIG") == "" {
		return fmt.Errorf("KUBECONFIG is not set; bring a cluster up with scripts/k8s-up.sh and source /var/lib/sandboxd-k8s/env")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cfg, _, err := kubernetes.LoadConfig("", "")
	if err != nil {
		return err
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	ns := "sandboxd-lcbench-" + hex.EncodeToString(rb[:])
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		_ = cs.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{})
	}()
	kb, err := kubernetes.New(kubernetes.WithClientset(cs, cfg), kubernetes.WithNamespace(ns),
		kubernetes.WithDefaultImage(f.image), kubernetes.WithAgentImage(f.agentImage), kubernetes.WithImagePullPolicy(corev1.PullNever),
		kubernetes.WithRequests(sandbox.Resources{CPUs: 0.02, MemoryMB: 32}),
		kubernetes.WithStartTimeout(2*time.Minute), kubernetes.WithWorkspaceClaim(f.class, "2Gi"))
	if err != nil {
		return err
	}
	m := sandbox.NewManager(kb)
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Close()

	var got figures
	if err := measure(ctx, m, f, &got); err != nil {
		return err
	}
	machine, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	body := render(f, got, machine, v.GitVersion)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, "lifecycle-kubernetes", body, f.smoke, os.Stderr)
}

// firstCall is one stat of the workspace through the conversation's agent.
func firstCall(ctx context.Context, m *sandbox.Manager, conv string) error {
	c, _, err := m.Agent(ctx, tenant, conv)
	if err != nil {
		return err
	}
	_, err = c.Stat(ctx, &proto.StatRequest{Root: kubernetes.Workspace, Path: "."})
	return err
}

// created makes conv's sandbox (from snapshot snap when set) and times it
// until its first call answered.
func created(ctx context.Context, m *sandbox.Manager, conv, snap string) (sandbox.Info, time.Duration, error) {
	t0 := time.Now()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: conv, Snapshot: snap})
	if err != nil {
		return info, 0, err
	}
	if err := firstCall(ctx, m, conv); err != nil {
		return info, 0, err
	}
	return info, time.Since(t0), nil
}

func measure(ctx context.Context, m *sandbox.Manager, f flags, got *figures) error {
	for i := range f.rounds {
		info, d, err := created(ctx, m, fmt.Sprintf("cold-%d", i), "")
		if err != nil {
			return fmt.Errorf("cold create: %w", err)
		}
		got.cold = append(got.cold, d)
		if err := m.Delete(ctx, tenant, info.ID); err != nil {
			return err
		}
	}

	src, _, err := created(ctx, m, "source", "")
	if err != nil {
		return err
	}
	c, _, err := m.Agent(ctx, tenant, "source")
	if err != nil {
		return err
	}
	fill := fmt.Sprintf("head -c %d /dev/urandom > big", f.sizeMiB<<20)
	if r, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"sh", "-c", fill}, Dir: kubernetes.Workspace, Timeout: 5 * time.Minute}); err != nil || r.ExitCode != 0 {
		return fmt.Errorf("fill the workspace: %+v, %v", r, err)
	}
	for range f.rounds {
		t0 := time.Now()
		if _, err := m.Hibernate(ctx, tenant, src.ID); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := m.Resume(ctx, tenant, src.ID); err != nil {
			return err
		}
		if err := firstCall(ctx, m, "source"); err != nil {
			return err
		}
		got.hibernate = append(got.hibernate, t1.Sub(t0))
		got.resume = append(got.resume, time.Since(t1))
	}
	for i := range f.rounds {
		t0 := time.Now()
		snap, err := m.Snapshot(ctx, tenant, src.ID, "")
		if err != nil {
			return err
		}
		got.snapshot = append(got.snapshot, time.Since(t0))
		got.snapBytes = snap.SizeBytes
		info, d, err := created(ctx, m, fmt.Sprintf("restored-%d", i), snap.ID)
		if err != nil {
			return fmt.Errorf("create from a snapshot: %w", err)
		}
		got.restore = append(got.restore, d)
		if err := m.Delete(ctx, tenant, info.ID); err != nil {
			return err
		}
		if err := m.DeleteSnapshot(ctx, tenant, snap.ID); err != nil {
			return err
		}
	}
	var convs []string
	for i := range f.copies {
		convs = append(convs, fmt.Sprintf("fork-%d", i))
	}
	t0 := time.Now()
	snap, copies, failed, err := m.Fork(ctx, tenant, src.ID, convs)
	if err != nil || len(failed) > 0 {
		return fmt.Errorf("fork: %v %+v", err, failed)
	}
	got.fork = append(got.fork, time.Since(t0))
	for _, cp := range copies {
		if err := m.Delete(ctx, tenant, cp.ID); err != nil {
			return err
		}
	}
	return m.DeleteSnapshot(ctx, tenant, snap.ID)
}

func render(f flags, got figures, machine, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Lifecycle on Kubernetes: hibernate, resume, snapshots, forks\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; Kubernetes %s (single node on this machine, scripts/k8s-up.sh; its hostPath provisioner `%s`); load average at the end %s; image `%s`, agent image `%s`._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, version, f.class, bench.LoadAverage(), f.image, f.agentImage)
	b.WriteString("| figure | n | p50 | max |\n| --- | ---: | ---: | ---: |\n")
	row := func(what string, s []time.Duration) {
		sum := bench.Summarize(s)
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", what, sum.N, bench.Ms(sum.P50), bench.Ms(sum.Max))
	}
	row("**cold create** with a workspace claim until the first call answered", got.cold)
	row("**hibernate**: Manager.Hibernate until it returned (pod deleted, claim kept)", got.hibernate)
	row("**resume** of a hibernated sandbox until the first call answered (a new pod on the claim)", got.resume)
	row(fmt.Sprintf("**snapshot** of a workspace holding %d MiB of random bytes", f.sizeMiB), got.snapshot)
	row("**a sandbox made from that snapshot** until its first call answered", got.restore)
	row(fmt.Sprintf("**fork into %d copies** (one snapshot, then the copies one after another)", f.copies), got.fork)
	fmt.Fprintf(&b, "\nA snapshot's `size_bytes`: %s (a claim of its own, of the workspace class; only the workspace: no image can be committed from a pod).\n\n", bench.MiB(got.snapBytes))
	b.WriteString("How: `. /var/lib/sandboxd-k8s/env && go run ./cmd/kubelifecyclebench` with the cluster up, one process driving a Manager on the Kubernetes backend with `workspace_claim` (2Gi of the class above), in a namespace of its own. " +
		"A cold create makes the claim and the pod and waits for the first `stat` through the agent; hibernate signals the agent (it records its processes) and deletes the pod; resume makes a pod on the claim and waits for the first `stat`. " +
		"A snapshot streams the workspace (`sandbox-agent archive --freeze` in the pod, every other process of the sandbox stopped meanwhile) through sandboxd into `sandbox-agent extract` in a loader pod on a new claim, which it starts first (most of the time is that pod's start); a sandbox made from it copies the tree in an init container before its agent starts. Each restored sandbox and each snapshot is deleted, untimed, before the next round.\n")
	return b.String()
}
