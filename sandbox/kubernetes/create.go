package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Create makes a pod for spec and waits until its sandbox container runs.
// The Manager has validated spec; a pod that cannot start in time (image
// not on the node, unschedulable, agent exited) is deleted again and the
// error says why.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	img := spec.Image
	if img == "" {
		img = b.image
	}
	if img == "" {
		return sandbox.Info{}, errdefs.InvalidArgument("no image was named and no default image is configured; name one or set default_image")
	}
	if spec.HostWorkspace != "" {
		return sandbox.Info{}, errdefs.InvalidArgument("the kubernetes backend cannot mount a host directory as the workspace (the pod may run on any node); leave workspace.host_path out")
	}
	if isolated(spec.Network) {
		if err := b.ensureNetworkPolicy(ctx); err != nil {
			return sandbox.Info{}, err
		}
	}

	var snapClaim string
	if spec.Snapshot != "" {
		c, err := b.snapshotClaim(ctx, spec.Snapshot)
		if err != nil {
			return sandbox.Info{}, err
		}
		snapClaim = c.Name
	}

	id := newID()
	pod := b.podFor(id, img, spec)
	var claim *corev1.PersistentVolumeClaim
	if b.claimsOn() {
		useClaim(pod)
		want, err := b.claimFor(pod)
		if err != nil {
			return sandbox.Info{}, err
		}
		if claim, err = b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return sandbox.Info{}, apiErr("create the workspace claim of a sandbox ("+b.claimSpec+" of storage class "+classOrDefault(b.claimClass)+")", err)
		}
		ownedBy(pod, claim)
	}
	// After the claim has recorded the pod's spec: a pod made again on
	// the claim (a wake) keeps its files and copies nothing.
	if snapClaim != "" {
		restoreFrom(pod, snapClaim)
	}
	created, err := b.cs.CoreV1().Pods(b.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		b.dropClaim(ctx, claim)
		return sandbox.Info{}, apiErr("create a sandbox pod from "+img, err)
	}
	p, err := b.waitRunning(ctx, created.Name)
	if err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rmErr := b.deletePod(cleanup, created); rmErr != nil {
			b.log.Warn("cannot delete a sandbox pod that failed to start", "pod", created.Name, "err", rmErr)
		}
		b.dropClaim(cleanup, claim)
		return sandbox.Info{}, err
	}
	return infoOf(p), nil
}

// dropClaim deletes the claim of a sandbox that could not be made (nil:
// none), logging a failure.
func (b *Backend) dropClaim(ctx context.Context, c *corev1.PersistentVolumeClaim) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.deleteClaim(ctx, c.Name); err != nil {
		b.log.Warn("cannot delete the workspace claim of a sandbox that failed to start", "claim", c.Name, "err", err)
	}
}

// classOrDefault names a storage class for a message.
func classOrDefault(class string) string {
	if class == "" {
		return "the cluster's default"
	}
	return class
}

// failFast are waiting reasons that no amount of waiting fixes.
var failFast = map[string]bool{
	"ErrImageNeverPull":          true,
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// waitRunning reads the pod until its sandbox container runs, it fails, or
// the start timeout (or ctx) ends. A watch on the pod wakes it as soon as
// the kubelet reports a change; the ticker is the fallback when the watch
// cannot be had or ends early.
func (b *Backend) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, b.startTimeout)
	defer cancel()
	tick := time.NewTicker(b.pollEvery)
	defer tick.Stop()
	var changed <-chan watch.Event
	if w, err := b.cs.CoreV1().Pods(b.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name}); err == nil {
		defer w.Stop()
		changed = w.ResultChan()
		tick.Reset(b.watchedPollEvery)
	}
	var last *corev1.Pod
	var eventsRead time.Time
	for {
		p, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, errdefs.Unavailable("sandbox pod %s was deleted while it started; retry", name)
		case err != nil && ctx.Err() == nil:
			return nil, apiErr("get the new pod "+name, err)
		case err == nil:
			last = p
			if mapState(p) == sandbox.StateRunning {
				return p, nil
			}
			if reason := stuck(p); reason != "" {
				return nil, startErr(p, reason)
			}
			// A node whose runtime refuses the pod itself says so only in
			// an event, and the pod waits in ContainerCreating for ever.
			if p.Spec.NodeName != "" && time.Since(eventsRead) >= eventsEvery {
				eventsRead = time.Now()
				if msg := b.runtimeRefusal(ctx, p); msg != "" {
					return nil, refusedErr(p, msg)
				}
			}
		}
		select {
		case <-ctx.Done():
			why := "it was not created"
			if last != nil {
				why = whyNotRunning(last) + unschedulable(last)
			}
			return nil, errdefs.DeadlineExceeded("sandbox pod %s did not start within %s (%s); check the cluster's capacity and the image, then retry", name, b.startTimeout, why)
		case _, ok := <-changed:
			if !ok { // the watch ended: poll from here on
				changed = nil
				tick.Reset(b.pollEvery)
			}
		case <-tick.C:
		}
	}
}

// eventsEvery is how often a starting pod's events are read.
const eventsEvery = 2 * time.Second

// runtimeRefusals are the words of a node's container runtime refusing a
// pod for good (FailedCreatePodSandBox): the runtime lacks user namespaces,
// or the RuntimeClass's handler.
var runtimeRefusals = []string{"does not support user namespaces", "no runtime for", "failed to get sandbox runtime"}

// runtimeRefusal is the message of an event in which the node's runtime
// refused p for good, or "" (also when the events cannot be read: RBAC
// without events only loses the early answer).
func (b *Backend) runtimeRefusal(ctx context.Context, p *corev1.Pod) string {
	evs, err := b.cs.CoreV1().Events(b.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + p.Name + ",reason=FailedCreatePodSandBox", Limit: 20})
	if err != nil {
		return ""
	}
	for _, ev := range evs.Items {
		if ev.InvolvedObject.UID != p.UID {
			continue // an earlier pod of the same name
		}
		for _, w := range runtimeRefusals {
			if strings.Contains(ev.Message, w) {
				return ev.Message
			}
		}
	}
	return ""
}

// refusedErr says that the node's runtime refused p, and what to change.
func refusedErr(p *corev1.Pod, msg string) error {
	fix := "run it on nodes whose container runtime has what the pod asks"
	switch {
	case p.Spec.HostUsers != nil && !*p.Spec.HostUsers && strings.Contains(msg, "user namespaces"):
		fix = "turn kubernetes.user_namespaces off, or run sandboxes on nodes whose runtime supports user namespaces (containerd 2.0 or later with runc 1.2 or later)"
	case p.Spec.RuntimeClassName != nil:
		fix = fmt.Sprintf("give every node's containerd the handler of RuntimeClass %s (for gVisor: runsc and its shim), or create the sandbox with another runtime", *p.Spec.RuntimeClassName)
	}
	return errdefs.FailedPrecondition("sandbox pod %s cannot start: the node's container runtime refused it (%s); %s", p.Name, msg, fix)
}

// stuck names why a starting pod will never run, or "".
func stuck(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return string(p.Status.Phase)
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && failFast[w.Reason] {
			return w.Reason
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return "container " + cs.Name + " exited"
		}
	}
	return ""
}

// startErr explains a pod that cannot start, with what to do about it.
func startErr(p *corev1.Pod, reason string) error {
	why := whyNotRunning(p)
	switch reason {
	case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
		return errdefs.FailedPrecondition("sandbox pod %s cannot get its image (%s); import the image into the nodes' container runtime or push it to a registry the cluster can pull from, and check kubernetes.image_pull_policy", p.Name, why)
	}
	return errdefs.FailedPrecondition("sandbox pod %s cannot start (%s); check the image and that sandboxd's image holds %s", p.Name, why, AgentSource)
}

// unschedulable adds the scheduler's complaint, if any.
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("; not scheduled: %s", c.Message)
		}
	}
	return ""
}

// ensureNetworkPolicy creates the namespace's isolating policy once, when
// configured; a failure is retried at the next Create.
func (b *Backend) ensureNetworkPolicy(ctx context.Context) error {
	if !b.netPolicy {
		return nil
	}
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	if b.policyDone {
		return nil
	}
	want := b.networkPolicy()
	nps := b.cs.NetworkingV1().NetworkPolicies(b.namespace)
	_, err := nps.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Made by an older sandboxd that isolated "none" pods only: it
		// must select "proxy" pods as well.
		var have *networkingv1.NetworkPolicy
		if have, err = nps.Get(ctx, NetworkPolicyName, metav1.GetOptions{}); err == nil && !equality.Semantic.DeepEqual(have.Spec, want.Spec) {
			have.Spec = want.Spec
			_, err = nps.Update(ctx, have, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return apiErr("create NetworkPolicy "+NetworkPolicyName+" in namespace "+b.namespace, err)
	}
	b.policyDone = true
	return nil
}
