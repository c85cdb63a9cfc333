package runrecords

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/cluster/clustertest"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/tools"
)

// Two replicas' run stores over one real namespace: a run created on one is
// listed, served and deleted by the other; records of another deployment
// and broken records are not served.
func TestClusterTwoReplicas(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sandboxd-test")
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
	a := runstore.New(runstore.WithRecords(recA, nil))
	b := runstore.New(runstore.WithRecords(recB, nil))

	run, err := a.Create(t.Context(), tools.Run{Tenant: "acme", Conversation: "c1", Surface: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(t.Context(), "acme", run.ID); err != nil || got != run {
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
	if _, err := b.Get(t.Context(), "acme", "run_00000000-0000-4000-8000-0000000000ff"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a broken record is served: %v", err)
	}

	if err := b.Delete(t.Context(), "acme", run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, recordName("prod", run.ID), metav1.GetOptions{}); err == nil {
		t.Errorf("the record outlived Delete")
	}
	eventually(t, "a stops serving the deleted run", func() bool {
		_, err := a.Get(t.Context(), "acme", run.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
	if got := a.List(t.Context(), "acme"); len(got) != 0 {
		t.Errorf("a lists %v after the delete", ids(got))
	}
}
