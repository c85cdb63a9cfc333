package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// listManaged selects our pods; limit 0 means all.
func listManaged(limit int64) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true", Limit: limit}
}

// listOwn selects the deployment's pods (and the unlabelled ones when it
// adopts them, filtered again by Owns).
func (b *Backend) listOwn() metav1.ListOptions {
	opts := listManaged(0)
	if !b.dep.AdoptUnlabelled {
		opts.LabelSelector += "," + sandbox.LabelDeployment + "=" + b.dep.Name
	}
	return opts
}

// List returns every sandbox of the deployment in the namespace: its pods
// that carry sandbox.LabelManaged, except those being deleted (as good as
// gone), and with workspace claims the claims whose pod does not run
// (hibernated).
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	pods, err := b.cs.CoreV1().Pods(b.namespace).List(ctx, b.listOwn())
	if err != nil {
		return nil, apiErr("list pods in namespace "+b.namespace, err)
	}
	claims, err := b.listClaims(ctx, pods.Items)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Info, 0, len(pods.Items)+len(claims))
	seen := make(map[string]bool, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		seen[string(p.UID)] = true
		if !b.dep.Owns(p.Labels) {
			continue
		}
		if c := claims[claimOf(p)]; c != nil {
			// The claim is reported once: here, or below when no pod runs.
			delete(claims, c.Name)
			if !awake(p) {
				if !hibernating(c) {
					b.reportStopped(p)
				}
				out = append(out, hibernatedInfo(c, p))
				continue
			}
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		b.reportStopped(p)
		out = append(out, infoOf(p))
	}
	for _, c := range claims {
		out = append(out, hibernatedInfo(c, nil))
	}
	b.reportedMu.Lock()
	for uid := range b.reported {
		if !seen[uid] {
			delete(b.reported, uid)
		}
	}
	b.reportedMu.Unlock()
	return out, nil
}

// listClaims returns the deployment's workspace claims by name, except
// those being deleted; it reads them when claims are on, or when a pod
// has one (made while they were).
func (b *Backend) listClaims(ctx context.Context, pods []corev1.Pod) (map[string]*corev1.PersistentVolumeClaim, error) {
	need := b.claimsOn()
	for i := 0; i < len(pods) && !need; i++ {
		need = claimOf(&pods[i]) != ""
	}
	if !need {
		return nil, nil
	}
	list, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).List(ctx, b.listOwn())
	if err != nil {
		return nil, apiErr("list the workspace claims in namespace "+b.namespace, err)
	}
	out := make(map[string]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		if c.DeletionTimestamp == nil && b.ours(c.ObjectMeta) {
			out[c.Name] = c
		}
	}
	return out, nil
}

// Unlabelled counts the namespace's managed pods without a deployment label.
func (b *Backend) Unlabelled(ctx context.Context) (int, error) {
	opts := listManaged(0)
	opts.LabelSelector += ",!" + sandbox.LabelDeployment
	pods, err := b.cs.CoreV1().Pods(b.namespace).List(ctx, opts)
	if err != nil {
		return 0, apiErr("list pods in namespace "+b.namespace, err)
	}
	return len(pods.Items), nil
}

// Inspect returns the sandbox id (pod sandboxd-<deployment>-<id>, and its
// workspace claim when the pod does not run).
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	o, err := b.find(ctx, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	if o.pod != nil && (o.claim == nil || !hibernating(o.claim)) {
		b.reportStopped(o.pod)
	}
	return o.info(), nil
}

// pod finds our pod for id; one without our label, of another deployment
// or being deleted is NotFound.
func (b *Backend) pod(ctx context.Context, id string) (*corev1.Pod, error) {
	notFound := errdefs.NotFound("sandbox %s does not exist in namespace %s", id, b.namespace)
	if !validID(id) {
		return nil, notFound
	}
	p, err := b.getPod(ctx, id)
	switch {
	case err != nil:
		return nil, err
	case p == nil || p.DeletionTimestamp != nil:
		return nil, notFound
	}
	return p, nil
}

// infoFrom is what the labels and annotations of a sandbox's pod (or
// claim) say of it.
func infoFrom(m metav1.ObjectMeta) sandbox.Info {
	labels := maps.Clone(m.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// The raw values live in the annotations; the labels may be hashes.
	for _, k := range []string{sandbox.LabelTenant, sandbox.LabelConversation, sandbox.LabelCreatedAt, sandbox.LabelEgress, sandbox.LabelEgressChange, sandbox.LabelLifecycle, sandbox.LabelExpiry, sandbox.LabelSetuid, sandbox.LabelRuntime, sandbox.LabelReadOnlyRoot} {
		if v, ok := m.Annotations[k]; ok {
			labels[k] = v
		}
	}
	for k, v := range m.Annotations {
		if strings.HasPrefix(k, sandbox.LabelExtPrefix) {
			labels[k] = v
		}
	}
	created, err := time.Parse(time.RFC3339Nano, labels[sandbox.LabelCreatedAt])
	if err != nil {
		created = m.CreationTimestamp.Time
	}
	return sandbox.Info{
		ID:           podID(m.Name),
		Tenant:       labels[sandbox.LabelTenant],
		Conversation: labels[sandbox.LabelConversation],
		Deployment:   labels[sandbox.LabelDeployment],
		Backend:      "kubernetes",
		CreatedAt:    created.UTC(),
		Workspace:    Workspace,
		Labels:       labels,
	}
}

func infoOf(p *corev1.Pod) sandbox.Info {
	info := infoFrom(p.ObjectMeta)
	info.Image = imageOf(p.Spec)
	info.State = mapState(p)
	info.StateSince = sinceOf(p)
	if c := claimOf(p); c != "" {
		info.Labels[LabelWorkspaceClaim] = c
	}
	return info
}

// imageOf is the sandbox container's image.
func imageOf(spec corev1.PodSpec) string {
	for _, c := range spec.Containers {
		if c.Name == ContainerName {
			return c.Image
		}
	}
	return ""
}

// mapState folds a pod's phase into the API's states: only a Running pod
// whose sandbox container runs can take tool calls; a deleted pod is gone;
// anything else (Pending, Failed, Succeeded, evicted, Unknown) is stopped.
func mapState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return sandbox.StateGone
	}
	if p.Status.Phase == corev1.PodRunning && containerRunning(p) {
		return sandbox.StateRunning
	}
	return sandbox.StateStopped
}

func containerRunning(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName {
			return cs.State.Running != nil
		}
	}
	return false
}

// whyNotRunning is one clause saying why pod p cannot take tool calls, for
// errors and logs: the phase, the pod's reason (Evicted, ...) and message,
// and the sandbox container's last state.
func whyNotRunning(p *corev1.Pod) string {
	parts := []string{"pod phase " + string(p.Status.Phase)}
	if p.Status.Reason != "" {
		parts = append(parts, "reason "+p.Status.Reason)
	}
	if p.Status.Message != "" {
		parts = append(parts, fmt.Sprintf("%q", p.Status.Message))
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			parts = append(parts, fmt.Sprintf("container %s terminated: %s (exit code %d) %s", cs.Name, t.Reason, t.ExitCode, t.Message))
		}
	}
	return strings.TrimSpace(strings.Join(parts, "; "))
}

// reportStopped logs, once per pod, why a sandbox pod stopped (evicted,
// its agent exited, ...): the one place an operator sees the reason.
func (b *Backend) reportStopped(p *corev1.Pod) {
	if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
		return
	}
	b.reportedMu.Lock()
	seen := b.reported[string(p.UID)]
	b.reported[string(p.UID)] = true
	b.reportedMu.Unlock()
	if !seen {
		b.log.Warn("sandbox pod stopped", "pod", p.Name, "tenant", p.Annotations[sandbox.LabelTenant],
			"conversation", p.Annotations[sandbox.LabelConversation], "why", whyNotRunning(p))
	}
}

// podID is the sandbox id in a pod name: what follows its last '-'
// (sandboxd-<deployment>-<id>, or sandboxd-<id> from before deployments).
func podID(name string) string {
	return name[strings.LastIndexByte(name, '-')+1:]
}

// validID accepts our 12-hex-digit ids; anything else cannot name a pod of
// ours and must not reach the API server.
func validID(id string) bool {
	if len(id) != 12 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'f' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
