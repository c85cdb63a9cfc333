package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/errdefs"
)

// managedBy marks a namespace deploy made, so that undeploy removes it and
// never one it did not make.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "sandboxd-cluster"
)

// connect reads the kubeconfig and checks that the API server responds
// within 10 seconds, so a cluster that is down is said at once.
func connect(ctx context.Context, kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, errdefs.InvalidArgument("the kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx); err != nil {
		return nil, nil, errdefs.Unavailable("the API server %s does not answer (%v); is the cluster up? (make cluster-up)", rc.Host, err)
	}
	return rc, cs, nil
}

// ensureNamespace makes the namespace, marked as deploy's, unless it
// exists; a namespace being deleted (an undeploy just before) is waited
// for first.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string, poll time.Duration) error {
	for {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{managedByLabel: managedBy},
			}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create namespace %s: %w", name, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("namespace %s: %w", name, err)
		case ns.DeletionTimestamp == nil:
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return errdefs.DeadlineExceeded("namespace %s was still being deleted when time ran out (%v); try again once it is gone", name, context.Cause(ctx))
		case <-t.C:
		}
	}
}
