package kubernetes

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A proxy sandbox's egress spec and a later change both come back from
// the pod, as another replica (or a restarted one) reads it.
func TestAnnotateAndEgressLabelsComeBack(t *testing.T) {
	b, _ := fakeCluster(t, nil)
	info, err := b.Create(bg(t), sandbox.Spec{Tenant: "acme", Conversation: "c1", Network: sandbox.NetworkProxy,
		Egress: &sandbox.EgressSpec{Allow: []string{"pypi.org"}, Secrets: []string{"gh"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Annotate(bg(t), info.ID, sandbox.LabelEgressChange, `{"allow":["npm.test"]}`); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inspect(bg(t), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sandbox.NetworkOf(got) != sandbox.NetworkProxy || got.Labels[sandbox.LabelEgressChange] != `{"allow":["npm.test"]}` {
		t.Fatalf("labels after the change: %v", got.Labels)
	}
	spec, err := sandbox.EgressOf(got)
	if err != nil || len(spec.Allow) != 1 || spec.Allow[0] != "pypi.org" || spec.Secrets[0] != "gh" {
		t.Fatalf("the creation's egress spec: %+v %v", spec, err)
	}
	if err := b.Annotate(bg(t), "nosuch123456", sandbox.LabelEgressChange, "{}"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("annotating a missing sandbox: %v", err)
	}
}
