package kubernetes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Two deployments in one namespace: pods named apart, each labelled with
// its deployment, and neither sees, inspects or removes the other's.
func TestDeploymentsShareANamespaceApart(t *testing.T) {
	a, cs := fakeCluster(t, nil, WithDeployment(sandbox.Deployment{Name: "blue"}))
	b, err := New(WithClientset(cs, nil), WithNamespace("sbx"), WithDefaultImage("img:1"), WithDeployment(sandbox.Deployment{Name: "green"}))
	if err != nil {
		t.Fatal(err)
	}
	b.pollEvery = a.pollEvery
	ia, err := a.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	pa, err := cs.CoreV1().Pods("sbx").Get(bg(t), "sandboxd-blue-"+ia.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod of blue's sandbox: %v", err)
	}
	if pa.Labels[sandbox.LabelDeployment] != "blue" || ia.Deployment != "blue" || ib.Deployment != "green" {
		t.Errorf("deployment label %q, infos %q and %q", pa.Labels[sandbox.LabelDeployment], ia.Deployment, ib.Deployment)
	}
	for _, tc := range []struct {
		be         *Backend
		own, other sandbox.Info
	}{{a, ia, ib}, {b, ib, ia}} {
		name := tc.be.Deployment().Name
		list, err := tc.be.List(bg(t))
		if err != nil || len(list) != 1 || list[0].ID != tc.own.ID {
			t.Errorf("%s's List = %+v, %v; want only %s", name, list, err, tc.own.ID)
		}
		if _, err := tc.be.Inspect(bg(t), tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's Inspect of the other's = %v, want not_found", name, err)
		}
		if err := tc.be.Remove(bg(t), tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's Remove of the other's = %v, want not_found", name, err)
		}
	}
	if _, err := b.Inspect(bg(t), ib.ID); err != nil {
		t.Errorf("green's sandbox after blue's attempts: %v", err)
	}
}

// A pod of a sandboxd from before deployments (sandboxd-<id>, no
// deployment label) is nobody's, unless the deployment adopts unlabelled
// sandboxes.
func TestUnlabelledPodAdoptedOnlyWhenConfigured(t *testing.T) {
	a, cs := fakeCluster(t, nil)
	legacy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: NamePrefix + "0123456789ab", Namespace: "sbx",
		Labels:      map[string]string{sandbox.LabelManaged: "true"},
		Annotations: map[string]string{sandbox.LabelTenant: "acme", sandbox.LabelConversation: "old"},
	}}
	running(legacy)
	if _, err := cs.CoreV1().Pods("sbx").Create(bg(t), legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if list, _ := a.List(bg(t)); len(list) != 0 {
		t.Errorf("List without adoption = %+v, want none", list)
	}
	if _, err := a.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "new"}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Unlabelled(bg(t)); err != nil || n != 1 {
		t.Errorf("Unlabelled = %d, %v; want the 1 legacy pod", n, err)
	}
	if _, err := a.Inspect(bg(t), "0123456789ab"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect without adoption = %v, want not_found", err)
	}
	adopter, err := New(WithClientset(cs, nil), WithNamespace("sbx"), WithDeployment(sandbox.Deployment{Name: "old", AdoptUnlabelled: true}))
	if err != nil {
		t.Fatal(err)
	}
	list, err := adopter.List(bg(t))
	if err != nil || len(list) != 1 || list[0].ID != "0123456789ab" || list[0].Conversation != "old" || list[0].Deployment != "" {
		t.Fatalf("List with adoption = %+v, %v; want the legacy pod only (not the default deployment's)", list, err)
	}
	if info, err := adopter.Inspect(bg(t), "0123456789ab"); err != nil || info.State != sandbox.StateRunning {
		t.Errorf("Inspect with adoption = %+v, %v", info, err)
	}
}

func TestDeploymentNameChecked(t *testing.T) {
	_, err := New(WithClientset(nil, nil), WithDeployment(sandbox.Deployment{Name: "Not_Valid"}))
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "Not_Valid") {
		t.Fatalf("New with a bad deployment name = %v, want invalid_argument naming it", err)
	}
}
