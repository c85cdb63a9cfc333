package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func objMeta(name, ns, dep string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: ns}
	if dep != "" {
		m.Labels = map[string]string{deploymentLabel: dep}
	}
	return m
}

// undeploy removes what sandboxd made for its deployment, and nothing of
// another deployment's or of no deployment.
func TestRemoveDeployment(t *testing.T) {
	cs := fakeCluster(
		&corev1.Pod{ObjectMeta: objMeta("sandboxd-sandboxd-abc", "ns", "sandboxd")},
		&corev1.Pod{ObjectMeta: objMeta("sandboxd-other-abc", "ns", "other")},
		&corev1.Pod{ObjectMeta: objMeta("sandboxd-sandboxd-elsewhere", "ns2", "sandboxd")},
		&coordinationv1.Lease{ObjectMeta: objMeta("sandboxd-sandboxd-c-0123", "ns", "sandboxd")},
		&coordinationv1.Lease{ObjectMeta: objMeta("sandboxd-sandboxd-r-sandboxd-0", "ns", "sandboxd")},
		&corev1.ConfigMap{ObjectMeta: objMeta("sandboxd-sandboxd-run-1", "ns", "sandboxd")},
		&corev1.ConfigMap{ObjectMeta: objMeta("sandboxd", "ns", "")},
	)
	ctx := context.Background()
	if err := removeDeployment(ctx, cs, "ns", "sandboxd"); err != nil {
		t.Fatal(err)
	}
	gone := func(err error) bool { return apierrors.IsNotFound(err) }
	for name, err := range map[string]error{
		"pod sandboxd-sandboxd-abc":         second(cs.CoreV1().Pods("ns").Get(ctx, "sandboxd-sandboxd-abc", metav1.GetOptions{})),
		"lease sandboxd-sandboxd-c-0123":    second(cs.CoordinationV1().Leases("ns").Get(ctx, "sandboxd-sandboxd-c-0123", metav1.GetOptions{})),
		"lease sandboxd-sandboxd-r-...":     second(cs.CoordinationV1().Leases("ns").Get(ctx, "sandboxd-sandboxd-r-sandboxd-0", metav1.GetOptions{})),
		"configmap sandboxd-sandboxd-run-1": second(cs.CoreV1().ConfigMaps("ns").Get(ctx, "sandboxd-sandboxd-run-1", metav1.GetOptions{})),
	} {
		if !gone(err) {
			t.Errorf("%s is still there (%v)", name, err)
		}
	}
	for name, err := range map[string]error{
		"pod of deployment other":       second(cs.CoreV1().Pods("ns").Get(ctx, "sandboxd-other-abc", metav1.GetOptions{})),
		"pod in another namespace":      second(cs.CoreV1().Pods("ns2").Get(ctx, "sandboxd-sandboxd-elsewhere", metav1.GetOptions{})),
		"the chart's unlabelled config": second(cs.CoreV1().ConfigMaps("ns").Get(ctx, "sandboxd", metav1.GetOptions{})),
	} {
		if err != nil {
			t.Errorf("%s was removed (%v)", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Only the namespace deploy made goes.
func TestRemoveNamespace(t *testing.T) {
	ours := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandboxd-replicas", Labels: map[string]string{managedByLabel: managedBy}}}
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	cs := fakeCluster(ours, theirs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var log bytes.Buffer
	if err := removeNamespace(ctx, cs, "sandboxd-replicas", &log, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := removeNamespace(ctx, cs, "default", &log, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "sandboxd-replicas", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace sandboxd-replicas is still there (%v)", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace default, not deploy's, was removed (%v)", err)
	}
	if !strings.Contains(log.String(), "namespace default was not made by deploy; it stays") {
		t.Errorf("log = %q", log.String())
	}

	// deploy makes its namespace, marked, and leaves an existing one alone.
	cs = fakeCluster(theirs)
	for _, name := range []string{"fresh", "default"} {
		if err := ensureNamespace(ctx, cs, name, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, "fresh", metav1.GetOptions{}); err != nil || ns.Labels[managedByLabel] != managedBy {
		t.Errorf("the namespace deploy made = %v, %v; want it marked %s=%s", ns, err, managedByLabel, managedBy)
	}
	if ns, _ := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); ns.Labels[managedByLabel] != "" {
		t.Errorf("deploy marked the existing namespace default: %v", ns.Labels)
	}
}
