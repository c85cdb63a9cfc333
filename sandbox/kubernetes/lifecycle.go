package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Kubernetes cannot freeze a pod, so the backend is no sandbox.Freezer: a
// sandbox sleeps by hibernating, which needs a workspace claim.
var _ sandbox.Hibernator = (*Backend)(nil)

// signalWait bounds the exec that sends the hibernation signal;
// signalCutWait is how long the pod is watched for its end when that exec
// failed.
const (
	signalWait    = 10 * time.Second
	signalCutWait = 2 * time.Second
)

var _ sandbox.HibernationChecker = (*Backend)(nil)

// Hibernatable says whether sandbox info can hibernate: only one with a
// workspace claim keeps its files without its pod.
func (b *Backend) Hibernatable(info sandbox.Info) bool {
	return info.Labels[LabelWorkspaceClaim] != ""
}

// noClaim refuses to hibernate a sandbox whose workspace would die with
// its pod.
func noClaim(id string) error {
	return errdefs.FailedPrecondition("sandbox %s cannot hibernate: its workspace is an emptyDir that would be lost with its pod; configure kubernetes.workspace_claim (storage_class and size) so that new sandboxes keep their workspace on a PersistentVolumeClaim", id)
}

// Hibernate stops the sandbox's processes and deletes its pod, keeping its
// workspace claim. The claim is marked first, so that from here on the
// sandbox reads as hibernated once its pod ends, however it ends; then the
// agent (PID 1) is sent the hibernation signal through an exec, so that it
// records its processes on the claim and exits, and the pod is deleted
// once it has (or after hibernateGrace, or at once when no signal could be
// sent: the kubelet's SIGTERM then stops the agent without that record).
func (b *Backend) Hibernate(ctx context.Context, id string) error {
	o, err := b.find(ctx, id)
	if err != nil {
		return err
	}
	if o.claim != nil { // hibernated already: its pod is gone or ended
		if !hibernating(o.claim) {
			since := o.info().StateSince
			if since.IsZero() {
				since = time.Now()
			}
			if err := b.markHibernated(ctx, o.claim.Name, since); err != nil {
				return err
			}
		}
		if o.pod != nil && o.pod.DeletionTimestamp == nil {
			return b.deletePod(ctx, o.pod)
		}
		return nil
	}
	p := o.pod
	name := claimOf(p)
	switch {
	case name == "":
		return noClaim(id)
	case !awake(p):
		return errdefs.FailedPrecondition("sandbox %s stopped (%s) and its workspace claim %s is gone, so there is nothing to hibernate; delete it", id, whyNotRunning(p), name)
	case mapState(p) != sandbox.StateRunning:
		return errdefs.FailedPrecondition("sandbox %s is still starting (%s); hibernate it once it runs", id, whyNotRunning(p))
	}
	if err := b.markHibernated(ctx, name, time.Now()); errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.FailedPrecondition("sandbox %s cannot hibernate: its workspace claim %s is gone, so its files would be lost with its pod", id, name)
	} else if err != nil {
		return err
	}
	wait := b.hibernateGrace
	ex, err := b.executor(p.Name, []string{"sh", "-c", "kill -PWR 1"}, false)
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, signalWait)
		err = ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
		cancel()
		if err != nil {
			// The exec may have been cut by the agent's exit, which ends
			// every process of the container: the pod's end tells.
			wait = min(wait, signalCutWait)
		}
	} else {
		wait = 0
	}
	if wait > 0 {
		if werr := b.waitEnded(ctx, p.Name, p.UID, wait); werr == nil {
			return b.deletePod(ctx, p)
		} else if err == nil {
			err = werr
		}
	}
	b.log.Warn("the agent did not take the hibernation signal; its pod is deleted, so it stops without recording its processes", "id", id, "err", err)
	return b.deletePod(ctx, p)
}

// markHibernated records on claim name when the hibernation began.
func (b *Backend) markHibernated(ctx context.Context, name string, at time.Time) error {
	return b.patchClaimAnnotation(ctx, name, AnnotationHibernatedAt, at.UTC().Format(time.RFC3339Nano))
}

// patchClaimAnnotation sets (nil: removes) one annotation of claim name.
func (b *Backend) patchClaimAnnotation(ctx context.Context, name, key string, value any) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if _, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiErr("annotate the workspace claim "+name, err)
	}
	return nil
}

// waitEnded waits until pod name (of uid) has ended or is gone, within d.
func (b *Backend) waitEnded(ctx context.Context, name string, uid types.UID, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		p, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || err == nil && (p.UID != uid || ended(p)):
			return nil
		case ctx.Err() != nil:
			return errdefs.DeadlineExceeded("pod %s still runs %s after the hibernation signal", name, d)
		}
		select {
		case <-ctx.Done():
		case <-time.After(b.pollEvery):
		}
	}
}

// Wake makes a hibernated sandbox's pod again from the spec on its claim
// and returns once its sandbox container runs (its agent's init starts as
// at creation, and reports what the hibernation stopped). A pod that ended
// is deleted first, one being deleted is waited for; a sandbox that runs
// is left alone. A sandbox without a claim whose pod ended cannot be
// started again.
func (b *Backend) Wake(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, b.startTimeout)
	defer cancel()
	for {
		o, err := b.find(ctx, id)
		if err != nil {
			return b.wakeErr(ctx, id, err)
		}
		p := o.pod
		switch {
		case o.claim == nil && mapState(p) == sandbox.StateRunning:
			if name := claimOf(p); name != "" {
				if err := b.patchClaimAnnotation(ctx, name, AnnotationHibernatedAt, nil); err != nil {
					b.log.Warn("the woken sandbox's claim still says it hibernated", "id", id, "err", err)
				}
			}
			return nil
		case o.claim == nil && awake(p): // starting
			if _, err := b.waitRunning(ctx, p.Name); err != nil {
				return b.startFailed(ctx, id, p, err)
			}
		case o.claim == nil:
			return errdefs.FailedPrecondition("sandbox %s stopped (%s) and has no workspace claim, so it cannot be started again; delete it and create a new one", id, whyNotRunning(p))
		case p != nil && p.DeletionTimestamp == nil:
			// Ended (evicted, its agent exited): make room for the new pod.
			if err := b.deletePodNow(ctx, p); err != nil {
				return err
			}
		case p != nil:
			if err := b.waitGone(ctx, p.Name, p.UID); err != nil {
				return b.wakeErr(ctx, id, err)
			}
		default:
			pod, err := b.podFromClaim(o.claim)
			if err != nil {
				return err
			}
			created, err := b.cs.CoreV1().Pods(b.namespace).Create(ctx, pod, metav1.CreateOptions{})
			switch {
			case apierrors.IsAlreadyExists(err):
				continue // made meanwhile (another replica's wake): look again
			case err != nil:
				return b.wakeErr(ctx, id, apiErr("create the pod of sandbox "+id+" on its workspace claim", err))
			}
			if _, err := b.waitRunning(ctx, created.Name); err != nil {
				return b.startFailed(ctx, id, created, err)
			}
		}
	}
}

// startFailed deletes a woken pod that cannot run, so that the sandbox is
// hibernated again with its claim, and returns why it could not.
func (b *Backend) startFailed(ctx context.Context, id string, p *corev1.Pod, err error) error {
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rmErr := b.deletePod(cleanup, p); rmErr != nil {
		b.log.Warn("cannot delete a woken sandbox pod that failed to start", "id", id, "pod", p.Name, "err", rmErr)
	}
	return err
}

// wakeErr words a wake's error once its time ran out.
func (b *Backend) wakeErr(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return errdefs.DeadlineExceeded("sandbox %s did not wake within %s (%v); retry", id, b.startTimeout, err)
	}
	return err
}

// deletePodNow deletes exactly p with no grace: it has ended.
func (b *Backend) deletePodNow(ctx context.Context, p *corev1.Pod) error {
	zero := int64(0)
	uid := p.UID
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := b.cs.CoreV1().Pods(b.namespace).Delete(ctx, p.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiErr("delete the ended pod "+p.Name, err)
	}
	return nil
}

// waitGone waits until pod name of uid no longer exists (ctx bounds it).
func (b *Backend) waitGone(ctx context.Context, name string, uid types.UID) error {
	for {
		p, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || err == nil && p.UID != uid:
			return nil
		case err != nil && ctx.Err() == nil:
			return apiErr("get pod "+name, err)
		}
		select {
		case <-ctx.Done():
			return errdefs.DeadlineExceeded("the old pod %s of the sandbox was still being deleted", name)
		case <-time.After(b.pollEvery):
		}
	}
}
