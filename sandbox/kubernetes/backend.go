// Package kubernetes is the sandbox backend on a Kubernetes cluster. A
// sandbox is one Pod named sandboxd-<deployment>-<id> in one namespace. Its only
// container runs `sandbox-agent init` as PID 1; the agent binary comes from
// sandboxd's own image through an init container that copies it into an
// emptyDir, mounted read-only at the same path as in the Docker backend. The
// workspace is an emptyDir at /workspace, or with WithWorkspaceClaim a
// PersistentVolumeClaim of the sandbox's own that outlives its pod: such a
// sandbox can hibernate (its pod deleted, its claim kept) and wake on a new
// pod, and one whose pod was deleted or evicted behind sandboxd's back is
// hibernated too, woken by the next call (workspace.go). The pod runs with no privilege
// escalation, every capability dropped but the Docker backend's few, the
// runtime's default seccomp profile, no service-account token, CPU and
// memory limits from the request, and optionally a RuntimeClass. For a
// sandbox made with network "none" the init container also takes the pod's
// interfaces down (it is then the only container with NET_ADMIN), so it has
// no way out on any CNI; a NetworkPolicy that cuts such pods off can be
// added for clusters that enforce one.
//
// The conversation map lives in the API server: raw tenant and
// conversation in annotations (labels cannot hold every value), a
// label-safe form of each in labels for selectors. Tool calls reach the
// agent through one exec per sandbox via the API server (WebSocket, falling
// back to SPDY).
package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// Paths and names inside the pod.
const (
	// AgentPath is where the agent is found in the sandbox container, the
	// same path as in the Docker backend.
	AgentPath = docker.AgentPath
	// AgentSource is where sandboxd's image keeps the agent binary.
	AgentSource = "/usr/local/bin/sandbox-agent"
	// Workspace is the workspace root.
	Workspace = docker.Workspace
	// NamePrefix starts every pod name.
	NamePrefix = "sandboxd-"
	// ContainerName is the sandbox container; InitContainerName copies the
	// agent in (and takes a network "none" pod's interfaces down).
	ContainerName     = "sandbox"
	InitContainerName = "agent"
	// HomeSeedContainerName copies the image's home directory into the
	// writable one of a sandbox whose root is read-only.
	HomeSeedContainerName = "home"
	// DefaultAgentImage is sandboxd's own image.
	DefaultAgentImage = "sandboxd:latest"
	// NetworkPolicyName names the policy that isolates network "none" pods.
	NetworkPolicyName = "sandboxd-deny-network"
)

// LabelNetwork records the requested network ("none" or "bridge") so the
// NetworkPolicy can select the isolated pods.
const LabelNetwork = sandbox.LabelNetwork

// Defaults where neither the request nor an option says otherwise.
var (
	DefaultResources = docker.DefaultResources
	DefaultRequests  = sandbox.Resources{CPUs: 0.1, MemoryMB: 256}
)

// DefaultStartTimeout bounds how long a new pod may take to run.
const DefaultStartTimeout = 3 * time.Minute

// DefaultHibernateGrace is how long a hibernating agent has to record its
// processes and exit, as in the Docker backend.
const DefaultHibernateGrace = 10 * time.Second

// Backend is a sandbox.Backend on a Kubernetes cluster. Every response comes
// from the API server; the only state it keeps is whether the namespace's
// NetworkPolicy exists and which stopped pods it already reported.
type Backend struct {
	cs         kubernetes.Interface
	rest       *rest.Config // nil with a fake clientset: no exec
	kubeconfig string
	kubeCtx    string
	log        *slog.Logger
	namespace  string

	image        string
	agentImage   string
	pullPolicy   corev1.PullPolicy
	runtimeClass string
	gvisorClass  string // the RuntimeClass of runtime gvisor; "": not served
	userNS       bool   // pods with hostUsers: false
	netPolicy    bool
	linksDown    bool
	serviceAcct  string
	nodeSelector map[string]string
	caps         []string
	defaults     sandbox.Resources
	requests     sandbox.Resources
	startTimeout time.Duration
	dep          sandbox.Deployment
	// claimSize and claimClass make each sandbox's workspace claim;
	// claimSpec is the option as given, parsed by New.
	claimSize  resource.Quantity
	claimClass string
	claimSpec  string
	// hibernateGrace is how long a hibernating agent has to record its
	// processes and exit before its pod is deleted anyway.
	hibernateGrace time.Duration
	pollEvery      time.Duration
	// watchedPollEvery is the fallback read of a starting pod while a
	// watch on it reports its changes.
	watchedPollEvery time.Duration

	// policyMu guards policyDone: the NetworkPolicy is made once.
	policyMu   sync.Mutex
	policyDone bool
	// reportedMu guards reported: the UIDs of stopped pods whose reason was
	// logged, pruned to the pods that still exist at every List.
	reportedMu sync.Mutex
	reported   map[string]bool
}

var (
	_ sandbox.Backend           = (*Backend)(nil)
	_ sandbox.Pinger            = (*Backend)(nil)
	_ sandbox.UnlabelledCounter = (*Backend)(nil)
)

// Option configures a Backend.
type Option func(*Backend)

// WithClientset uses cs; cfg (may be nil) is needed to exec. Without this
// option New loads the configuration (in-cluster, else KUBECONFIG).
func WithClientset(cs kubernetes.Interface, cfg *rest.Config) Option {
	return func(b *Backend) { b.cs, b.rest = cs, cfg }
}

// WithKubeconfig loads the configuration from path (and its context ctx,
// "" for the current one) instead of in-cluster config or KUBECONFIG.
func WithKubeconfig(path, ctx string) Option {
	return func(b *Backend) { b.kubeconfig, b.kubeCtx = path, ctx }
}

// WithNamespace puts sandboxes in ns.
func WithNamespace(ns string) Option { return func(b *Backend) { b.namespace = ns } }

// WithDefaultImage is used when a spec names no image.
func WithDefaultImage(image string) Option { return func(b *Backend) { b.image = image } }

// WithAgentImage is the image holding sandbox-agent at AgentSource.
func WithAgentImage(image string) Option { return func(b *Backend) { b.agentImage = image } }

// WithImagePullPolicy applies to the sandbox and agent images.
func WithImagePullPolicy(p corev1.PullPolicy) Option { return func(b *Backend) { b.pullPolicy = p } }

// WithRuntimeClass runs sandbox pods under a RuntimeClass.
func WithRuntimeClass(name string) Option { return func(b *Backend) { b.runtimeClass = name } }

// WithGVisorRuntimeClass is the RuntimeClass (its handler runsc) of the
// sandboxes created with runtime gvisor; without it they are refused.
func WithGVisorRuntimeClass(name string) Option { return func(b *Backend) { b.gvisorClass = name } }

// WithUserNamespaces runs sandbox pods in their own user namespace
// (hostUsers: false): root in the sandbox maps to an unprivileged user on
// the node. The nodes' container runtime must support it.
func WithUserNamespaces(on bool) Option { return func(b *Backend) { b.userNS = on } }

var (
	_ sandbox.RuntimeServer      = (*Backend)(nil)
	_ sandbox.ReadOnlyRootServer = (*Backend)(nil)
)

// ServesReadOnlyRoot is true: see readOnlyRoot.
func (b *Backend) ServesReadOnlyRoot() bool { return true }

// Runtimes are runc, and gvisor where a RuntimeClass is configured for it.
func (b *Backend) Runtimes() []string {
	if b.gvisorClass == "" {
		return []string{sandbox.RuntimeRunc}
	}
	return []string{sandbox.RuntimeRunc, sandbox.RuntimeGVisor}
}

// WithNetworkPolicy creates the namespace's NetworkPolicy that isolates
// network "none" sandboxes.
func WithNetworkPolicy(on bool) Option { return func(b *Backend) { b.netPolicy = on } }

// WithLinksDown says whether the init container of a network "none" pod
// takes its interfaces down (the default). It needs NET_ADMIN in that init
// container, which Pod Security's baseline and restricted levels
// forbid: turn it off there and rely on WithNetworkPolicy.
func WithLinksDown(on bool) Option { return func(b *Backend) { b.linksDown = on } }

// WithServiceAccount runs sandboxes under a service account (never mounted).
func WithServiceAccount(name string) Option { return func(b *Backend) { b.serviceAcct = name } }

// WithNodeSelector constrains scheduling.
func WithNodeSelector(sel map[string]string) Option {
	return func(b *Backend) { b.nodeSelector = sel }
}

// WithExtraCaps adds capabilities to docker.DefaultCaps.
func WithExtraCaps(caps ...string) Option {
	return func(b *Backend) { b.caps = append(b.caps, caps...) }
}

// WithDefaultResources replaces DefaultResources (the limits).
func WithDefaultResources(r sandbox.Resources) Option { return func(b *Backend) { b.defaults = r } }

// WithRequests replaces DefaultRequests; a request above its limit is cut
// to the limit.
func WithRequests(r sandbox.Resources) Option { return func(b *Backend) { b.requests = r } }

// WithStartTimeout bounds how long Create waits for the pod to run.
func WithStartTimeout(d time.Duration) Option { return func(b *Backend) { b.startTimeout = d } }

// WithDeployment is the deployment the backend works for (default
// sandbox.DefaultDeploymentName): it labels every pod it makes, puts its
// name in the pod names, and sees only that deployment's pods.
func WithDeployment(d sandbox.Deployment) Option { return func(b *Backend) { b.dep = d } }

// WithWorkspaceClaim gives each new sandbox a PersistentVolumeClaim of
// size (a quantity such as "10Gi") in storageClass ("" for the cluster's
// default) for its workspace and its agent's state, which makes it able
// to hibernate and keeps its files when its pod goes; see workspace.go.
// An empty size leaves the workspace on an emptyDir.
func WithWorkspaceClaim(storageClass, size string) Option {
	return func(b *Backend) { b.claimClass, b.claimSpec = storageClass, size }
}

// WithLogger sets the logger (agent stderr and pod failures go there).
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// New returns a Backend. It does not contact the API server.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{
		log:              slog.New(slog.DiscardHandler),
		agentImage:       DefaultAgentImage,
		pullPolicy:       corev1.PullIfNotPresent,
		caps:             append([]string(nil), docker.DefaultCaps...),
		linksDown:        true,
		defaults:         DefaultResources,
		requests:         DefaultRequests,
		startTimeout:     DefaultStartTimeout,
		hibernateGrace:   DefaultHibernateGrace,
		pollEvery:        100 * time.Millisecond,
		watchedPollEvery: time.Second,
		reported:         map[string]bool{},
	}
	for _, opt := range opts {
		opt(b)
	}
	b.dep = b.dep.OrDefault()
	if err := sandbox.ValidateDeployment(b.dep.Name); err != nil {
		return nil, err
	}
	if b.claimSpec != "" {
		q, err := resource.ParseQuantity(b.claimSpec)
		if err != nil || q.Sign() <= 0 {
			return nil, errdefs.InvalidArgument("the workspace claim size %q is not a positive quantity; use one such as \"10Gi\"", b.claimSpec)
		}
		b.claimSize = q
	}
	if b.cs == nil {
		cfg, ns, err := LoadConfig(b.kubeconfig, b.kubeCtx)
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, errdefs.InvalidArgument("the Kubernetes client cannot be configured: %v; check the kubeconfig", err)
		}
		b.cs, b.rest = cs, cfg
		if b.namespace == "" {
			b.namespace = ns
		}
	}
	if b.namespace == "" {
		b.namespace = "default"
	}
	return b, nil
}

// inClusterNamespaceFile holds the pod's own namespace when in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the namespace of the pod this process runs in, from
// POD_NAMESPACE (the downward API) or the service account's mount; "" when
// it runs in no pod.
func PodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	b, err := os.ReadFile(inClusterNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoadConfig returns the client configuration and its namespace: the
// kubeconfig file when one is named (or KUBECONFIG is set), else the
// in-cluster configuration, else ~/.kube/config.
func LoadConfig(kubeconfig, context string) (*rest.Config, string, error) {
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			ns := PodNamespace()
			if ns == "" {
				ns = "default"
			}
			return tuned(cfg), ns, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", errdefs.FailedPrecondition("no Kubernetes configuration was found (%v); run sandboxd in a pod, or set KUBECONFIG or kubernetes.kubeconfig", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return tuned(cfg), ns, nil
}

// tuned raises client-go's default rate limits: a busy sandboxd polls pods
// and opens execs faster than 5 requests per second.
func tuned(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "sandboxd"
	return cfg
}

// claimsOn says whether new sandboxes get a workspace claim.
func (b *Backend) claimsOn() bool { return b.claimSpec != "" }

// Name is "kubernetes".
func (b *Backend) Name() string { return "kubernetes" }

// Deployment is the deployment the backend works for.
func (b *Backend) Deployment() sandbox.Deployment { return b.dep }

// PodName is the pod of sandbox id: sandboxd-<deployment>-<id>, so that
// deployments sharing a namespace never make pods of one name.
func (b *Backend) PodName(id string) string { return NamePrefix + b.dep.Name + "-" + id }

// Namespace is where the sandbox pods live.
func (b *Backend) Namespace() string { return b.namespace }

// Ping checks that the API server responds and the namespace is readable.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cs.CoreV1().Pods(b.namespace).List(ctx, listManaged(1)); err != nil {
		return apiErr(fmt.Sprintf("list pods in namespace %s", b.namespace), err)
	}
	return nil
}

// Clientset is the backend's API client, for the parts of sandboxd that
// keep their own objects in the cluster (replication's leases and runs).
func (b *Backend) Clientset() kubernetes.Interface { return b.cs }
