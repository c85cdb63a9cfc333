// Command kubebench measures the Kubernetes backend next to the Docker
// backend in the same run, on the same sandbox image, and rewrites the
// kubernetes section of BENCHMARKS.md:
//
//   - create-to-ready: Manager.Create until the first agent call returned
//     (for Kubernetes: the pod scheduled, the agent copied in by the init
//     container, the sandbox container running, the exec pipe attached);
//   - a tool call on the open agent pipe (read a 4 KiB file), p50/p90/p99;
//   - the same call over a fresh exec each time (for Kubernetes one exec
//     through the API server, as `kubectl exec` does; then the handshake,
//     the read and the close).
//
// Run from the repository root with a cluster up (scripts/k8s-up.sh, which
// imports the images into the node) and Docker holding the same image:
//
//	. /var/lib/sandboxd-k8s/env && go run ./cmd/kubebench [-out BENCHMARKS.md] [--smoke]
//
// --smoke measures one of each and checks the section renders, leaving the
// file alone (scripts/test.sh runs it while its cluster is up).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

type flags struct {
	image, agentImage string
	out               string
	creates           int
	calls             int
	fresh             int
	smoke             bool
}

func main() {
	var f flags
	flag.StringVar(&f.image, "image", "sandboxd-sandbox:latest", "sandbox image (in Docker, and imported into the node)")
	flag.StringVar(&f.agentImage, "agent-image", bench.EnvOr("SANDBOXD_TEST_K8S_AGENT_IMAGE", kubernetes.DefaultAgentImage), "image carrying sandbox-agent, imported into the node")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose kubernetes section is rewritten; empty prints it")
	flag.IntVar(&f.creates, "creates", 5, "sandboxes created per backend")
	flag.IntVar(&f.calls, "calls", 1000, "tool calls on the open pipe per backend")
	flag.IntVar(&f.fresh, "fresh", 50, "tool calls over a fresh exec per backend")
	flag.BoolVar(&f.smoke, "smoke", false, "one create, call and fresh exec per backend; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.creates, f.calls, f.fresh = 1, 1, 1
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "kubebench:", err)
		os.Exit(1)
	}
}

func run(f flags) error {
	if os.Getenv("KUBECONFIG") == "" {
		return fmt.Errorf("KUBECONFIG is not set; bring a cluster up with scripts/k8s-up.sh and source /var/lib/sandboxd-k8s/env")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandboxd-k8s-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	agentBin, err := sandboxtest.BuildAgent(dir)
	if err != nil {
		return err
	}
	db, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(f.image))
	if err != nil {
		return err
	}
	defer db.Close()

	cfg, _, err := kubernetes.LoadConfig("", "")
	if err != nil {
		return err
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns, err := namespace(ctx, cs)
	if err != nil {
		return err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		_ = cs.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{})
	}()
	kb, err := kubernetes.New(kubernetes.WithClientset(cs, cfg), kubernetes.WithNamespace(ns),
		kubernetes.WithDefaultImage(f.image), kubernetes.WithAgentImage(f.agentImage), kubernetes.WithImagePullPolicy(corev1.PullNever),
		// A 2-core node: the pod asks little, its limits match Docker's defaults.
		kubernetes.WithRequests(sandbox.Resources{CPUs: 0.02, MemoryMB: 32}),
		kubernetes.WithStartTimeout(2*time.Minute))
	if err != nil {
		return err
	}

	backends := []sandbox.Backend{db, kb}
	got, err := bench.CompareBackends(ctx, backends, f.image, f.creates, f.calls, f.fresh)
	if err != nil {
		return err
	}
	m, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	body := report(f, v.GitVersion).Render(m, got)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, "kubernetes", body, f.smoke, os.Stderr)
}

// namespace makes a namespace of the run's own, deleted (with its pods) at
// the end.
func namespace(ctx context.Context, cs k8s.Interface) (string, error) {
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return "", err
	}
	ns := "sandboxd-bench-" + hex.EncodeToString(rb[:])
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return ns, err
}
