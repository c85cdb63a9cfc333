package kubernetes

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

func TestClaimRelabelsAPoolPodOnce(t *testing.T) {
	b, cs := fakeCluster(t, nil)
	ctx := bg(t)
	warm, err := b.Create(ctx, sandbox.Spec{Image: "img:1", Pool: sandbox.PoolKey("img:1")})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Tenant != "" || warm.Conversation != "" || warm.Labels[sandbox.LabelPool] != sandbox.PoolKey("img:1") {
		t.Fatalf("pool pod = %+v, want no owner and the pool label", warm)
	}
	// Neither is a valid label value; the expiry and the front end's label
	// are JSON, kept as annotations as at a creation.
	owner := sandbox.Owner{Tenant: "acme corp", Conversation: "conv:1", Labels: map[string]string{
		sandbox.LabelExpiry: `{"at":"2031-01-01T00:00:00Z","then":"delete"}`, sandbox.LabelExtPrefix + "e2b": `{"template":"base"}`}}
	info, err := b.Claim(ctx, warm, owner)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if info.Tenant != owner.Tenant || info.Conversation != owner.Conversation {
		t.Fatalf("claimed = %s/%s, want %s/%s", info.Tenant, info.Conversation, owner.Tenant, owner.Conversation)
	}
	// Every reader sees the owner, as another replica or a restart would.
	p := getPod(t, cs, warm.ID)
	if p.Labels[sandbox.LabelConversation] != labelValue(owner.Conversation) || p.Labels[sandbox.LabelTenant] != labelValue(owner.Tenant) {
		t.Errorf("pod labels = %v, want the owner's label values", p.Labels)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Conversation != owner.Conversation || list[0].Tenant != owner.Tenant {
		t.Fatalf("List = %+v, %v; want the claimed pod with its owner", list, err)
	}
	for k, v := range owner.Labels {
		if list[0].Labels[k] != v || p.Annotations[k] != v {
			t.Errorf("%s after the claim: listed %q, annotated %q; want %q", k, list[0].Labels[k], p.Annotations[k], v)
		}
	}
	// A second claim, say by another replica that holds the same warm
	// pod, loses: the patch's test fails in the API server.
	if _, err := b.Claim(ctx, warm, sandbox.Owner{Tenant: "other", Conversation: "c2"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second Claim = %v, want conflict", err)
	}
	if got, _ := b.Inspect(ctx, warm.ID); got.Tenant != owner.Tenant {
		t.Fatalf("the losing claim changed the owner to %q", got.Tenant)
	}
	// A sandbox made for a conversation is no pool sandbox.
	cold, err := b.Create(ctx, sandbox.Spec{Tenant: "t", Conversation: "c", Image: "img:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, cold, owner); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Claim of a cold sandbox = %v, want failed_precondition", err)
	}
}
