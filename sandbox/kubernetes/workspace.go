package kubernetes

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox with a workspace claim (WithWorkspaceClaim) is a
// PersistentVolumeClaim and, while it is awake, a pod on it, both named
// sandboxd-<deployment>-<id>. The claim is the sandbox's identity: it
// carries the pod's labels and annotations (kept in step by Claim and
// Annotate) and the spec of its pod, from which Wake makes the pod again.
// The workspace is the claim's directory "workspace", mounted at
// /workspace; the agent keeps its state (file journals, the record of the
// processes a hibernation stopped) in its directory "agent", mounted
// outside the workspace, so that the agent that starts on a new pod
// reports what the old one stopped. A claim without a running pod (none,
// one being deleted, one that ended: evicted, its agent exited) is a
// hibernated sandbox, however its pod went; a pod is owned by its claim,
// so deleting the claim deletes the pod too.

// Paths and names of a sandbox with a workspace claim.
const (
	// AgentStateDir is where the agent keeps its state, on the claim.
	AgentStateDir = "/var/lib/sandboxd-agent"
	// claimWorkspaceDir and claimAgentDir are the claim's directories.
	claimWorkspaceDir = "workspace"
	claimAgentDir     = "agent"
)

// Annotations of a workspace claim.
const (
	// AnnotationPodSpec is the spec of the sandbox's pod (JSON).
	AnnotationPodSpec = "io.sandboxd.pod-spec"
	// AnnotationHibernatedAt is when Hibernate began (RFC 3339); the wake
	// removes it.
	AnnotationHibernatedAt = "io.sandboxd.hibernated-at"
)

// LabelWorkspaceClaim names, in Info.Labels, the sandbox's workspace claim;
// a sandbox without it cannot hibernate.
const LabelWorkspaceClaim = "io.sandboxd.workspace-claim"

// useClaim puts pod's workspace on the claim of its own name and the
// agent's state beside it.
func useClaim(pod *corev1.Pod) {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == workspaceVolume {
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pod.Name}}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != ContainerName {
			continue
		}
		for j := range c.VolumeMounts {
			if c.VolumeMounts[j].Name == workspaceVolume {
				c.VolumeMounts[j].SubPath = claimWorkspaceDir
			}
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: workspaceVolume, MountPath: AgentStateDir, SubPath: claimAgentDir})
		c.Command = append(c.Command, "--state-dir", AgentStateDir)
	}
}

// claimOf is the name of p's workspace claim, "" when its workspace is an
// emptyDir.
func claimOf(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == workspaceVolume && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// claimFor is the workspace claim of pod (made by podFor and useClaim),
// carrying its labels, annotations and spec.
func (b *Backend) claimFor(pod *corev1.Pod) (*corev1.PersistentVolumeClaim, error) {
	spec, err := json.Marshal(pod.Spec)
	if err != nil {
		return nil, errdefs.Internal("cannot encode the pod spec of sandbox %s: %v", podID(pod.Name), err)
	}
	annotations := maps.Clone(pod.Annotations)
	annotations[AnnotationPodSpec] = string(spec)
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pod.Name,
			Namespace:   b.namespace,
			Labels:      maps.Clone(pod.Labels),
			Annotations: annotations,
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: b.claimSize},
			},
		},
	}
	if b.claimClass != "" {
		class := b.claimClass
		c.Spec.StorageClassName = &class
	}
	return c, nil
}

// ownedBy makes c the owner of pod: deleting the claim deletes the pod.
func ownedBy(pod *corev1.Pod, c *corev1.PersistentVolumeClaim) {
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: c.Name, UID: c.UID}}
}

// podFromClaim is the pod that c's sandbox runs in: the spec it was made
// with, and the claim's labels and annotations as they are now.
func (b *Backend) podFromClaim(c *corev1.PersistentVolumeClaim) (*corev1.Pod, error) {
	var spec corev1.PodSpec
	if err := json.Unmarshal([]byte(c.Annotations[AnnotationPodSpec]), &spec); err != nil || claimOfSpec(spec) != c.Name {
		return nil, errdefs.FailedPrecondition("the workspace claim %s holds no usable pod spec (annotation %s), so its sandbox cannot be started again; delete the sandbox", c.Name, AnnotationPodSpec)
	}
	annotations := maps.Clone(c.Annotations)
	delete(annotations, AnnotationPodSpec)
	delete(annotations, AnnotationHibernatedAt)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.Name,
			Namespace:   b.namespace,
			Labels:      maps.Clone(c.Labels),
			Annotations: annotations,
		},
		Spec: spec,
	}
	ownedBy(pod, c)
	return pod, nil
}

func claimOfSpec(spec corev1.PodSpec) string {
	return claimOf(&corev1.Pod{Spec: spec})
}

// objects are what the API server holds of one sandbox. pod is nil when it
// has none; claim is set only when it decides the state: the sandbox has
// a claim and no running or starting pod.
type objects struct {
	pod   *corev1.Pod
	claim *corev1.PersistentVolumeClaim
}

// awake says whether a pod runs or is starting: its own state then is the
// sandbox's.
func awake(p *corev1.Pod) bool {
	return p != nil && p.DeletionTimestamp == nil && !ended(p)
}

// ended says whether p will never run again: it failed or succeeded
// (evicted, its agent exited), or its sandbox container terminated
// (restartPolicy Never), or it is being deleted.
func ended(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// find reads sandbox id: its pod, and its claim when the pod does not
// run. A sandbox of neither (or not ours, or being deleted) is NotFound.
func (b *Backend) find(ctx context.Context, id string) (objects, error) {
	notFound := errdefs.NotFound("sandbox %s does not exist in namespace %s", id, b.namespace)
	if !validID(id) {
		return objects{}, notFound
	}
	p, err := b.getPod(ctx, id)
	if err != nil {
		return objects{}, err
	}
	if awake(p) {
		return objects{pod: p}, nil
	}
	name := claimOf(p)
	if name == "" && p == nil && b.claimsOn() {
		name = b.PodName(id)
	}
	var c *corev1.PersistentVolumeClaim
	if name != "" {
		got, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return objects{}, apiErr("get the workspace claim "+name, err)
		case b.ours(got.ObjectMeta) && got.DeletionTimestamp == nil:
			c = got
		}
	}
	if c == nil && (p == nil || p.DeletionTimestamp != nil) {
		return objects{}, notFound
	}
	return objects{pod: p, claim: c}, nil
}

// getPod is our pod of id, nil when there is none (or it is not ours). A
// deployment that adopts unlabelled pods also finds those of a sandboxd
// from before deployments (sandboxd-<id>).
func (b *Backend) getPod(ctx context.Context, id string) (*corev1.Pod, error) {
	name := b.PodName(id)
	p, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && b.dep.AdoptUnlabelled {
		name = NamePrefix + id
		p, err = b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apiErr("get pod "+name, err)
	case !b.ours(p.ObjectMeta):
		return nil, nil
	}
	return p, nil
}

// ours says whether an object carries our label and belongs to the
// deployment.
func (b *Backend) ours(m metav1.ObjectMeta) bool {
	return m.Labels[sandbox.LabelManaged] == "true" && b.dep.Owns(m.Labels)
}

// info is the sandbox as the API reports it.
func (o objects) info() sandbox.Info {
	if o.claim != nil {
		return hibernatedInfo(o.claim, o.pod)
	}
	return infoOf(o.pod)
}

// hibernatedInfo is the sandbox of claim c, whose pod p (may be nil) does
// not run: hibernated, since Hibernate began, else since its pod ended
// where that is known.
func hibernatedInfo(c *corev1.PersistentVolumeClaim, p *corev1.Pod) sandbox.Info {
	info := infoFrom(c.ObjectMeta)
	var spec corev1.PodSpec
	if json.Unmarshal([]byte(c.Annotations[AnnotationPodSpec]), &spec) == nil {
		info.Image = imageOf(spec)
	}
	info.State = sandbox.StateHibernated
	info.Labels[LabelWorkspaceClaim] = c.Name
	if t, err := time.Parse(time.RFC3339Nano, c.Annotations[AnnotationHibernatedAt]); err == nil {
		info.StateSince = t.UTC()
	} else if p != nil {
		info.StateSince = sinceOf(p)
	}
	return info
}

// hibernating says whether Hibernate stopped c's sandbox (its pod's end
// is then no news to log).
func hibernating(c *corev1.PersistentVolumeClaim) bool {
	_, ok := c.Annotations[AnnotationHibernatedAt]
	return ok
}

// sinceOf is when p's sandbox container started running, or ended; zero
// when the kubelet has not said.
func sinceOf(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		switch {
		case cs.State.Running != nil && !cs.State.Running.StartedAt.IsZero():
			return cs.State.Running.StartedAt.UTC()
		case cs.State.Terminated != nil && !cs.State.Terminated.FinishedAt.IsZero():
			return cs.State.Terminated.FinishedAt.UTC()
		}
	}
	return time.Time{}
}
