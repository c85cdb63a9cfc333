package main

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/errdefs"
)

// deploymentLabel is on every object sandboxd makes in the cluster
// (sandbox pods, Leases, run records).
const deploymentLabel = "io.sandboxd.deployment"

// undeploy removes the release, then what sandboxd made for its deployment
// (which Helm does not know), then the namespace if deploy made it.
func undeploy(ctx context.Context, o options, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	_, cs, err := connect(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, o.namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		fmt.Fprintf(stderr, "sandboxd-cluster: no namespace %s: nothing to undeploy\n", o.namespace)
		return nil
	}
	cfg, err := helmConfig(o.kubeconfig, o.namespace, helmLog(o, stderr))
	if err != nil {
		return err
	}
	removed, err := uninstall(cfg, o.release, o.timeout)
	if err != nil {
		return err
	}
	if removed {
		fmt.Fprintf(stderr, "sandboxd-cluster: release %s removed from %s\n", o.release, o.namespace)
	}
	if err := removeDeployment(ctx, cs, o.namespace, o.release); err != nil {
		return err
	}
	return removeNamespace(ctx, cs, o.namespace, stderr, time.Second)
}

// removeDeployment deletes the sandbox pods, Leases and run records of
// deployment in namespace, one by one: a handful of objects.
func removeDeployment(ctx context.Context, cs kubernetes.Interface, namespace, deployment string) error {
	sel := metav1.ListOptions{LabelSelector: deploymentLabel + "=" + deployment}
	pods, leases, cms := cs.CoreV1().Pods(namespace), cs.CoordinationV1().Leases(namespace), cs.CoreV1().ConfigMaps(namespace)
	for _, c := range []struct {
		what string
		list func() ([]string, error)
		del  func(string) error
	}{
		{"sandbox pods", func() ([]string, error) { return listNames(pods.List(ctx, sel)) },
			func(n string) error { return pods.Delete(ctx, n, metav1.DeleteOptions{}) }},
		{"Leases", func() ([]string, error) { return listNames(leases.List(ctx, sel)) },
			func(n string) error { return leases.Delete(ctx, n, metav1.DeleteOptions{}) }},
		{"run records", func() ([]string, error) { return listNames(cms.List(ctx, sel)) },
			func(n string) error { return cms.Delete(ctx, n, metav1.DeleteOptions{}) }},
	} {
		ns, err := c.list()
		if err != nil {
			return fmt.Errorf("list the %s of %s: %w", c.what, deployment, err)
		}
		for _, n := range ns {
			if err := c.del(n); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s of %s: %w", n, deployment, err)
			}
		}
	}
	return nil
}

// listNames reads the names of a list response.
func listNames(l runtime.Object, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		a, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		out = append(out, a.GetName())
	}
	return out, nil
}

// removeNamespace deletes the namespace and waits until it is gone, if
// deploy made it; another namespace is left as it is.
func removeNamespace(ctx context.Context, cs kubernetes.Interface, name string, stderr io.Writer, poll time.Duration) error {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	if ns.Labels[managedByLabel] != managedBy {
		fmt.Fprintf(stderr, "sandboxd-cluster: namespace %s was not made by deploy; it stays\n", name)
		return nil
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(stderr, "sandboxd-cluster: namespace %s removed\n", name)
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return errdefs.DeadlineExceeded("namespace %s was still being deleted when time ran out (%v)", name, context.Cause(ctx))
		case <-t.C:
		}
	}
}
