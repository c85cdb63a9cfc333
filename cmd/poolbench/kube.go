package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
)

// kubeBackends returns a maker of Kubernetes backends in a namespace of
// the run's own, and the function that deletes it (with its pods).
func kubeBackends(ctx context.Context, f flags) (func(dep string) (sandbox.Backend, error), func(), error) {
	if os.Getenv("KUBECONFIG") == "" {
		return nil, nil, fmt.Errorf("KUBECONFIG is not set; bring a cluster up with scripts/k8s-up.sh and source /var/lib/sandboxd-k8s/env")
	}
	cfg, _, err := kubernetes.LoadConfig("", "")
	if err != nil {
		return nil, nil, err
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ns := "sandboxd-poolbench-" + randHex(4)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	done := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{})
	}
	return func(dep string) (sandbox.Backend, error) {
		return kubernetes.New(kubernetes.WithClientset(cs, cfg), kubernetes.WithNamespace(ns),
			kubernetes.WithDeployment(sandbox.Deployment{Name: dep}),
			kubernetes.WithDefaultImage(f.image), kubernetes.WithAgentImage(f.agentImage), kubernetes.WithImagePullPolicy(corev1.PullNever),
			// A 2-core node: the pods ask little, their limits match Docker's defaults.
			kubernetes.WithRequests(sandbox.Resources{CPUs: 0.02, MemoryMB: 32}),
			kubernetes.WithStartTimeout(2*time.Minute))
	}, done, nil
}
