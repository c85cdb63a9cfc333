package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A node whose container runtime refuses a sandbox pod for good — no user
// namespaces, no handler for the gVisor RuntimeClass — says so in an event
// only; the create answers with the runtime's words and what to change,
// not a timeout. The test cluster's containerd (1.6, runc only) refuses
// both, which is what this shows; a node that has them runs the pod.
func TestClusterRuntimeRefusalsAreSentences(t *testing.T) {
	t.Run("user namespaces", func(t *testing.T) {
		b, cs := newClusterBackend(t, WithUserNamespaces(true))
		ctx := clusterCtx(t)
		_, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c-userns"})
		if err == nil {
			// A runtime with user namespaces: the pod runs in its own.
			pods, _ := cs.CoreV1().Pods(b.namespace).List(ctx, metav1.ListOptions{})
			for _, p := range pods.Items {
				if p.Spec.HostUsers == nil || *p.Spec.HostUsers {
					t.Errorf("pod %s runs with the node's users", p.Name)
				}
			}
			t.Skip("this cluster's runtime supports user namespaces: the refusal is not shown")
		}
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "user namespaces") || !strings.Contains(err.Error(), "kubernetes.user_namespaces") {
			t.Fatalf("create with user namespaces on a runtime without them: %v; want a refusal naming user namespaces and the key to turn off", err)
		}
		t.Logf("the refusal: %v", err)
	})
	t.Run("gvisor runtime class without its handler", func(t *testing.T) {
		ctx := clusterCtx(t)
		b, cs := newClusterBackend(t)
		class := b.namespace + "-gvisor" // unique per test run, cluster-wide
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{}) })
		WithGVisorRuntimeClass(class)(b)
		info, err := b.Create(ctx, sandbox.Spec{Tenant: "acme", Conversation: "c-gvisor", Runtime: sandbox.RuntimeGVisor})
		if err == nil {
			if sandbox.RuntimeOf(info) != sandbox.RuntimeGVisor {
				t.Errorf("the sandbox runs %q, want gvisor", sandbox.RuntimeOf(info))
			}
			t.Skip("this cluster's nodes have runsc: the refusal is not shown")
		}
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "RuntimeClass "+class) || !strings.Contains(err.Error(), "runsc") {
			t.Fatalf("create under a RuntimeClass whose handler the node lacks: %v; want a refusal naming the class and runsc", err)
		}
		t.Logf("the refusal: %v", err)
	})
}
