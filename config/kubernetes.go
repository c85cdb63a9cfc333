package config

import (
	"fmt"
	"regexp"
	"strings"
)

// Kubernetes holds settings of the Kubernetes backend.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; "" means in-cluster config when
	// sandboxd runs in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context picks a kubeconfig context; "" means the current one.
	Context string `yaml:"context"`
	// Namespace holds the sandbox pods (default: the pod's own namespace
	// in-cluster, else "default").
	Namespace string `yaml:"namespace"`
	// AgentImage carries sandbox-agent at /usr/local/bin/sandbox-agent; an
	// init container copies it into every sandbox (default sandboxd:latest).
	AgentImage string `yaml:"agent_image"`
	// ImagePullPolicy applies to the sandbox and agent images: IfNotPresent
	// (default), Never (images imported into the nodes) or Always.
	ImagePullPolicy string `yaml:"image_pull_policy"`
	// RuntimeClassName runs sandboxes under a RuntimeClass (gVisor, Kata).
	RuntimeClassName string `yaml:"runtime_class_name"`
	// GVisorRuntimeClass is the RuntimeClass (handler runsc) of sandboxes
	// created with runtime gvisor; "" serves runc alone.
	GVisorRuntimeClass string `yaml:"gvisor_runtime_class"`
	// UserNamespaces runs sandbox pods with hostUsers: false, so root in a
	// sandbox is an unprivileged user on the node. The nodes' runtime must
	// support it (containerd 2.0 or later with runc 1.2 or later); a node
	// whose runtime does not refuses the pod, and the create says so.
	UserNamespaces bool `yaml:"user_namespaces"`
	// NetworkPolicy creates, once per namespace, a NetworkPolicy that denies
	// all traffic of sandboxes created with network "none". It needs a CNI
	// plugin that enforces NetworkPolicy, and RBAC on networkpolicies.
	NetworkPolicy bool `yaml:"network_policy"`
	// LinksDown gives network "none" sandboxes an init container with
	// NET_ADMIN that takes the pod's interfaces down before the sandbox
	// starts, so they have no way out on any CNI (default true). Pod
	// Security's baseline and restricted levels forbid NET_ADMIN: set it
	// false there and rely on network_policy.
	LinksDown *bool `yaml:"links_down"`
	// Requests are what the scheduler reserves per sandbox; the limits come
	// from the sandbox request (default cpus 0.1, memory_mb 256).
	Requests KubernetesRequests `yaml:"requests"`
	// StartTimeout bounds how long a new pod may take to run (default 3m,
	// which covers pulling a large image).
	StartTimeout Duration `yaml:"start_timeout"`
	// ServiceAccountName runs sandboxes under this service account (its token
	// is never mounted); "" means the namespace's default.
	ServiceAccountName string `yaml:"service_account_name"`
	// NodeSelector constrains where sandboxes are scheduled.
	NodeSelector map[string]string `yaml:"node_selector"`
	// WorkspaceClaim puts each sandbox's workspace on a PersistentVolumeClaim
	// of its own instead of an emptyDir, so that its files outlive its pod:
	// a sandbox can then hibernate (its pod deleted, its claim kept), and a
	// pod deleted or evicted behind sandboxd's back is made again on the
	// same claim at the next call. Only the workspace and the agent's state
	// survive a pod; the rest of the pod's file system does not.
	WorkspaceClaim KubernetesClaim `yaml:"workspace_claim"`
}

// KubernetesClaim is the PersistentVolumeClaim made for each sandbox. A
// size turns claims on.
type KubernetesClaim struct {
	// StorageClass provisions the claims; "" means the cluster's default
	// class.
	StorageClass string `yaml:"storage_class"`
	// Size is each claim's requested storage, a Kubernetes quantity such
	// as "10Gi"; "" leaves the workspace on an emptyDir.
	Size string `yaml:"size"`
}

// Enabled says whether sandboxes get a workspace claim.
func (c KubernetesClaim) Enabled() bool { return c.Size != "" }

// KubernetesRequests are a sandbox pod's resource requests.
type KubernetesRequests struct {
	CPUs     float64 `yaml:"cpus"`
	MemoryMB int64   `yaml:"memory_mb"`
}

// dnsLabel is an RFC 1123 label: namespaces and service account names.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// dnsSubdomain is an RFC 1123 subdomain: storage class names.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// storageSize is a Kubernetes quantity of bytes: digits, an optional
// fraction, and an optional binary or decimal suffix.
var storageSize = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)

// Validate checks the kubernetes keys; the message names the key.
func (k Kubernetes) Validate() error {
	switch k.ImagePullPolicy {
	case "", "IfNotPresent", "Never", "Always":
	default:
		return fmt.Errorf("kubernetes.image_pull_policy: %q is not known; use IfNotPresent, Never or Always", k.ImagePullPolicy)
	}
	switch {
	case k.Namespace != "" && !dnsLabel.MatchString(k.Namespace):
		return fmt.Errorf("kubernetes.namespace: %q is not a valid namespace name; use lower-case letters, digits and '-'", k.Namespace)
	case k.ServiceAccountName != "" && !dnsLabel.MatchString(k.ServiceAccountName):
		return fmt.Errorf("kubernetes.service_account_name: %q is not a valid name; use lower-case letters, digits and '-'", k.ServiceAccountName)
	case k.RuntimeClassName != "" && !dnsLabel.MatchString(k.RuntimeClassName):
		return fmt.Errorf("kubernetes.runtime_class_name: %q is not a valid name; use lower-case letters, digits and '-'", k.RuntimeClassName)
	case k.GVisorRuntimeClass != "" && !dnsLabel.MatchString(k.GVisorRuntimeClass):
		return fmt.Errorf("kubernetes.gvisor_runtime_class: %q is not a valid name; use lower-case letters, digits and '-'", k.GVisorRuntimeClass)
	case k.Requests.CPUs < 0 || k.Requests.MemoryMB < 0:
		return fmt.Errorf("kubernetes.requests: must not be negative (cpus %g, memory_mb %d); leave a field at 0 for the default", k.Requests.CPUs, k.Requests.MemoryMB)
	case k.StartTimeout < 0:
		return fmt.Errorf("kubernetes.start_timeout: is negative; use a positive duration such as \"3m\"")
	}
	return k.WorkspaceClaim.validate()
}

func (c KubernetesClaim) validate() error {
	switch {
	case c.Size == "" && c.StorageClass != "":
		return fmt.Errorf("kubernetes.workspace_claim.size: is empty, so storage_class %q is not used; give each claim's size, such as \"10Gi\"", c.StorageClass)
	case c.Size != "" && (!storageSize.MatchString(c.Size) || strings.Trim(c.Size, "0.KMGTPEik") == ""):
		return fmt.Errorf("kubernetes.workspace_claim.size: %q is not a size; use a positive quantity such as \"10Gi\" or \"500Mi\"", c.Size)
	case c.StorageClass != "" && !dnsSubdomain.MatchString(c.StorageClass):
		return fmt.Errorf("kubernetes.workspace_claim.storage_class: %q is not a valid name; use lower-case letters, digits, '-' and '.'", c.StorageClass)
	}
	return nil
}
