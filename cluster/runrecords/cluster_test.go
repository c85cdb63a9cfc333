package runrecords

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Cluster tests run against a real API server when SANDBOXD_TEST_KUBERNETES=1
// and KUBECONFIG names it (scripts/k8s-up.sh makes one); each uses a fresh
// namespace that is deleted when it ends.
func clusterNamespace(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_KUBERNETES") != "1" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("set SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG (scripts/k8s-up.sh) to run against a cluster")
	}
	// A cluster that is not up (yet) skips: the flag says to use one, not
	// that one is there.
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Skipf("KUBECONFIG is not usable, is the cluster up? %v", err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Skipf("the API server in KUBECONFIG does not answer, is the cluster up? %v", err)
	}
	cfg.Timeout = 30 * time.Second
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	ns := "sandboxd-test-" + hex.EncodeToString(rb[:])
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return cs, ns
}

// Two replicas' RunStores over one real namespace: a run created on one is
// listed, served and deleted by the other; records of another deployment
// and broken records are not served.
func TestClusterTwoReplicas(t *testing.T) {
	cs, ns := clusterNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(deployment string) *Store {
		s := New(cs, ns, deployment, WithSyncTimeout(30*time.Second))
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	recA, recB, staging := start("prod"), start("prod"), start("staging")
	a := api.NewRunStore(api.WithRunRecords(recA, nil))
	b := api.NewRunStore(api.WithRunRecords(recB, nil))

	run, err := a.Create(tools.Run{Tenant: "acme", Conversation: "c1", Surface: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get("acme", run.ID); err != nil || got != run {
		t.Fatalf("b.Get = %+v, %v", got, err)
	}
	eventually(t, "b lists a's run", func() bool { return len(recB.List("acme")) == 1 })
	if n := staging.Count("acme"); n != 0 {
		t.Errorf("another deployment counts %d of prod's runs", n)
	}
	if _, ok, err := staging.Get(ctx, run.ID); ok || err != nil {
		t.Errorf("another deployment gets prod's run: %v, %v", ok, err)
	}

	bad := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxd-prod-run-00000000-0000-4000-8000-0000000000ff", Namespace: ns,
			Labels: map[string]string{LabelDeployment: "prod", LabelKind: KindRun, LabelTenantHash: TenantHash("acme")}},
		Data: map[string]string{DataKey: "{broken"},
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get("acme", "run_00000000-0000-4000-8000-0000000000ff"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a broken record is served: %v", err)
	}

	if err := b.Delete("acme", run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, recordName("prod", run.ID), metav1.GetOptions{}); err == nil {
		t.Errorf("the record outlived Delete")
	}
	eventually(t, "a stops serving the deleted run", func() bool {
		_, err := a.Get("acme", run.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
	if got := a.List("acme"); len(got) != 0 {
		t.Errorf("a lists %v after the delete", ids(got))
	}
}
