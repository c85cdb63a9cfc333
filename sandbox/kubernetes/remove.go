package kubernetes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Remove deletes the pod, its emptyDir workspace with it. The agent gets
// terminationGrace seconds to stop its processes; from the moment the
// deletion is accepted the sandbox is gone for List and Inspect.
func (b *Backend) Remove(ctx context.Context, id string) error {
	p, err := b.pod(ctx, id)
	if err != nil {
		return err
	}
	return b.deletePod(ctx, p)
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
