package kubernetes

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// Volumes of a sandbox pod.
const (
	agentVolume     = "sandboxd-agent"
	workspaceVolume = "workspace"
	// tmpVolume and homeVolume are /tmp and the home directory of a
	// sandbox whose root is read-only.
	tmpVolume  = "tmp"
	homeVolume = "home"
)

// tmpSize bounds /tmp under a read-only root: it is memory, counted in the
// sandbox's memory limit.
var tmpSize = resource.MustParse("1Gi")

// terminationGrace is how long a deleted sandbox's agent has to stop its
// processes before the kubelet kills them.
const terminationGrace int64 = 5

// podFor is the whole pod definition of sandbox id; see the package doc.
func (b *Backend) podFor(id, img string, spec sandbox.Spec) *corev1.Pod {
	network := spec.Network
	if network == "" {
		network = "none"
	}
	created := time.Now().UTC().Format(time.RFC3339Nano)
	labels := map[string]string{
		sandbox.LabelManaged:      "true",
		sandbox.LabelTenant:       labelValue(spec.Tenant),
		sandbox.LabelConversation: labelValue(spec.Conversation),
		sandbox.LabelDeployment:   b.dep.Name, // a valid label value by ValidateDeployment
		LabelNetwork:              network,
	}
	if spec.Pool != "" {
		labels[sandbox.LabelPool] = spec.Pool // a valid label value by PoolKey
	}
	annotations := map[string]string{
		sandbox.LabelTenant:       spec.Tenant,
		sandbox.LabelConversation: spec.Conversation,
		sandbox.LabelCreatedAt:    created,
	}
	if v, ok := sandbox.NetworkLabels(spec)[sandbox.LabelEgress]; ok {
		annotations[sandbox.LabelEgress] = v // JSON: not a valid label value
	}
	maps.Copy(annotations, sandbox.LifecycleLabels(spec)) // JSON too
	maps.Copy(annotations, sandbox.ExpiryLabels(spec))
	maps.Copy(annotations, sandbox.ExtLabelsOf(spec))
	maps.Copy(annotations, sandbox.SetuidLabels(spec))
	maps.Copy(annotations, sandbox.RuntimeLabels(spec))
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}

	limits, requests := b.resources(spec.Resources)
	agentDir := path.Dir(AgentPath)
	no, escalate := false, spec.Setuid
	grace := terminationGrace
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	caps := make([]corev1.Capability, 0, len(b.caps))
	for _, c := range b.caps {
		caps = append(caps, corev1.Capability(c))
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        b.PodName(id),
			Namespace:   b.namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			// A sandbox whose agent exits stays stopped, as in the Docker
			// backend after `docker stop`: its processes are gone anyway.
			RestartPolicy:                 corev1.RestartPolicyNever,
			Hostname:                      "sandbox",
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ServiceAccountName:            b.serviceAcct,
			NodeSelector:                  maps.Clone(b.nodeSelector),
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: runtimeDefault},
			InitContainers:                []corev1.Container{b.agentInstaller(isolated(network) && b.linksDown)},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           img,
				ImagePullPolicy: b.pullPolicy,
				// The agent is PID 1 so that it reaps every orphan in the
				// sandbox, whatever the image's entrypoint would have been.
				Command:    []string{AgentPath, "init"},
				WorkingDir: Workspace,
				Env:        env,
				Resources:  corev1.ResourceRequirements{Limits: limits, Requests: requests},
				VolumeMounts: []corev1.VolumeMount{
					{Name: agentVolume, MountPath: agentDir, ReadOnly: true},
					{Name: workspaceVolume, MountPath: Workspace},
				},
				SecurityContext: &corev1.SecurityContext{
					// Spec.Setuid: sudo from an account that is not root.
					AllowPrivilegeEscalation: &escalate,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
					SeccompProfile:           runtimeDefault,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: agentVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if b.runtimeClass != "" {
		rc := b.runtimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	if spec.Runtime == sandbox.RuntimeGVisor {
		rc := b.gvisorClass
		pod.Spec.RuntimeClassName = &rc
	}
	if b.userNS {
		hostUsers := false
		pod.Spec.HostUsers = &hostUsers
	}
	if spec.ReadOnlyRoot {
		readOnlyRoot(pod, img, b.pullPolicy)
	}
	return pod
}

// readOnlyRoot makes the sandbox container's root file system read-only,
// with /tmp (memory, 1 GiB) and the home directory writable beside the
// workspace. The home directory starts with the image's files (dot files
// the tools and shells read): an init container of the sandbox's image
// copies them into its volume first.
func readOnlyRoot(pod *corev1.Pod, img string, pull corev1.PullPolicy) {
	yes, no := true, false
	c := &pod.Spec.Containers[0]
	c.SecurityContext.ReadOnlyRootFilesystem = &yes
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: tmpVolume, MountPath: "/tmp"},
		corev1.VolumeMount{Name: homeVolume, MountPath: docker.Home})
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
		corev1.Volume{Name: homeVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name:            HomeSeedContainerName,
		Image:           img,
		ImagePullPolicy: pull,
		Command:         []string{"cp", "-a", docker.Home + "/.", "/seed/"},
		VolumeMounts:    []corev1.VolumeMount{{Name: homeVolume, MountPath: "/seed"}},
		Resources:       corev1.ResourceRequirements{Limits: initLimits(), Requests: initLimits()},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	})
}

// agentInstaller is the init container that puts the agent into the
// emptyDir the sandbox mounts read-only (`sandbox-agent install`). With
// linksDown it also takes the pod's interfaces down, and is then the one
// container with NET_ADMIN (and root, which the capability needs); the
// sandbox container has neither, so nothing in the sandbox can bring a link
// up again. Without it, it runs as the image's user with no capability.
func (b *Backend) agentInstaller(linksDown bool) corev1.Container {
	no, yes := false, true
	agentDir := path.Dir(AgentPath)
	c := corev1.Container{
		Name:            InitContainerName,
		Image:           b.agentImage,
		ImagePullPolicy: b.pullPolicy,
		Command:         []string{AgentSource, "install", AgentPath},
		VolumeMounts:    []corev1.VolumeMount{{Name: agentVolume, MountPath: agentDir}},
		Resources:       corev1.ResourceRequirements{Limits: initLimits(), Requests: initLimits()},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if linksDown {
		root := int64(0)
		c.Command = []string{AgentSource, "install", "--links-down", AgentPath}
		c.SecurityContext.RunAsUser = &root
		c.SecurityContext.RunAsNonRoot = &no
		c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	}
	return c
}

// resources are the sandbox container's limits (the request, defaults where
// it says 0) and requests (the configured ones, never above the limits).
// Kubernetes has no per-pod pids limit: that is the kubelet's podPidsLimit.
func (b *Backend) resources(r sandbox.Resources) (limits, requests corev1.ResourceList) {
	if r.CPUs == 0 {
		r.CPUs = b.defaults.CPUs
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = b.defaults.MemoryMB
	}
	reqCPU, reqMem := min(b.requests.CPUs, r.CPUs), min(b.requests.MemoryMB, r.MemoryMB)
	limits = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(r.CPUs*1000), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.MemoryMB<<20, resource.BinarySI),
	}
	requests = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(reqCPU*1000), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(reqMem<<20, resource.BinarySI),
	}
	return limits, requests
}

// initLimits bound the init container: one copy and a few ioctls.
func initLimits() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	}
}

// isolated says whether a pod of network mode n must have no way out:
// "none", and "proxy", whose only way out is the agent's pipe.
func isolated(n string) bool { return n == "" || n == "none" || n == sandbox.NetworkProxy }

// networkPolicy isolates the namespace's network "none" and "proxy" sandboxes: no
// ingress and no egress. Exec reaches them through the kubelet, not the pod
// network, so the agent pipe is unaffected.
func (b *Backend) networkPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      NetworkPolicyName,
			Namespace: b.namespace,
			Labels:    map[string]string{sandbox.LabelManaged: "true"},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{sandbox.LabelManaged: "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: LabelNetwork, Operator: metav1.LabelSelectorOpIn, Values: []string{"none", sandbox.NetworkProxy},
				}},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// labelValue is v when it is a valid label value, else "h-" and a hash of
// it: tenants and conversation ids may hold ':' or exceed 63 characters.
// The raw value is in the annotation of the same key; selectors use this.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 && !hashLike(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// hashLike tells a raw value that could be mistaken for a hashed one.
func hashLike(v string) bool { return len(v) == 42 && v[:2] == "h-" }

// newID is 12 random hex digits, like the Docker backend's ids.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
