package main

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
)

// newKubernetes opens the kubernetes backend from the config's kubernetes
// keys: in-cluster when sandboxd runs in a pod, else the kubeconfig.
func newKubernetes(cfg *config.Config, dep sandbox.Deployment, log *slog.Logger) (*kubernetes.Backend, error) {
	k := cfg.Kubernetes
	// client-go reports through klog's process-wide logger; send it to ours
	// so its lines are structured like the rest.
	klog.SetSlogLogger(log.With("component", "client-go"))
	opts := []kubernetes.Option{
		kubernetes.WithDeployment(dep),
		kubernetes.WithKubeconfig(k.Kubeconfig, k.Context),
		kubernetes.WithDefaultImage(cfg.DefaultImage),
		kubernetes.WithRuntimeClass(k.RuntimeClassName),
		kubernetes.WithGVisorRuntimeClass(k.GVisorRuntimeClass),
		kubernetes.WithUserNamespaces(k.UserNamespaces),
		kubernetes.WithNetworkPolicy(k.NetworkPolicy),
		kubernetes.WithServiceAccount(k.ServiceAccountName),
		kubernetes.WithNodeSelector(k.NodeSelector),
		kubernetes.WithWorkspaceClaim(k.WorkspaceClaim.StorageClass, k.WorkspaceClaim.Size),
		kubernetes.WithLogger(log.With("backend", "kubernetes")),
	}
	if k.LinksDown != nil {
		opts = append(opts, kubernetes.WithLinksDown(*k.LinksDown))
	}
	if k.Namespace != "" {
		opts = append(opts, kubernetes.WithNamespace(k.Namespace))
	}
	if k.AgentImage != "" {
		opts = append(opts, kubernetes.WithAgentImage(k.AgentImage))
	}
	if k.ImagePullPolicy != "" {
		opts = append(opts, kubernetes.WithImagePullPolicy(corev1.PullPolicy(k.ImagePullPolicy)))
	}
	if k.StartTimeout > 0 {
		opts = append(opts, kubernetes.WithStartTimeout(k.StartTimeout.D()))
	}
	if k.Requests.CPUs > 0 || k.Requests.MemoryMB > 0 {
		r := kubernetes.DefaultRequests
		if k.Requests.CPUs > 0 {
			r.CPUs = k.Requests.CPUs
		}
		if k.Requests.MemoryMB > 0 {
			r.MemoryMB = k.Requests.MemoryMB
		}
		opts = append(opts, kubernetes.WithRequests(r))
	}
	return kubernetes.New(opts...)
}
