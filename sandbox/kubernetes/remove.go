package kubernetes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Remove deletes the pod, its emptyDir workspace with it, and the
// workspace claim if it has one (which deletes the files). The agent gets
// terminationGrace seconds to stop its processes; from the moment both
// deletions are accepted the sandbox is gone for List and Inspect.
func (b *Backend) Remove(ctx context.Context, id string) error {
	o, err := b.find(ctx, id)
	if err != nil {
		return err
	}
	if o.pod != nil && o.pod.DeletionTimestamp == nil {
		if err := b.deletePod(ctx, o.pod); err != nil {
			return err
		}
	}
	name := claimOf(o.pod)
	if o.claim != nil {
		name = o.claim.Name
	}
	if name == "" {
		return nil
	}
	return b.deleteClaim(ctx, name)
}

// deleteClaim deletes the workspace claim name; one already gone is fine.
func (b *Backend) deleteClaim(ctx context.Context, name string) error {
	err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete the workspace claim "+name, err)
	}
	return nil
}

// deletePod deletes exactly p (by UID), never a same-named successor.
func (b *Backend) deletePod(ctx context.Context, p *corev1.Pod) error {
	grace := terminationGrace
	uid := p.UID
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := b.cs.CoreV1().Pods(b.namespace).Delete(ctx, p.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete pod "+p.Name, err)
	}
	return nil
}
