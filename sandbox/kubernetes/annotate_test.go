package kubernetes

import (
	"errors"
	"testing"
	"time"

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

// A front end's labels and an expiry, stamped at creation as annotations
// (JSON is no label value) and an expiry changed later, come back in
// Inspect and List, as another replica reads them.
func TestExpiryAndFrontEndLabelsComeBack(t *testing.T) {
	b, _ := fakeCluster(t, nil)
	ext := map[string]string{sandbox.LabelExtPrefix + "e2b": `{"template":"base","metadata":{"k":"v w"}}`}
	spec := sandbox.Spec{Tenant: "acme", Conversation: "c1", Labels: ext,
		Expiry: sandbox.Expiry{At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Then: sandbox.ExpirePause}}
	info, err := b.Create(bg(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	changed := `{"at":"2031-01-01T00:00:00Z","then":"delete"}`
	if err := b.Annotate(bg(t), info.ID, sandbox.LabelExpiry, changed); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inspect(bg(t), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.List(bg(t))
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %+v %v", list, err)
	}
	for how, i := range map[string]sandbox.Info{"Inspect": got, "List": list[0]} {
		e, _, err := sandbox.ExpiryOf(i)
		if err != nil || !e.At.Equal(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)) || e.Then != sandbox.ExpireDelete {
			t.Errorf("%s: the expiry after the change is %+v (%v)", how, e, err)
		}
		if v := sandbox.ExtLabels(i)[sandbox.LabelExtPrefix+"e2b"]; v != ext[sandbox.LabelExtPrefix+"e2b"] {
			t.Errorf("%s: the front end's label is %q", how, v)
		}
	}
}
