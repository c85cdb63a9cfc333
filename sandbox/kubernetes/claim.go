package kubernetes

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

var _ sandbox.Claimer = (*Backend)(nil)

// Claim hands the unclaimed pool pod id to owner by patching its tenant and
// conversation labels and annotations in place. The JSON patch first tests
// the pod's UID and that its conversation annotation is still empty, so of
// two racing claims (two replicas) the API server applies one; the other
// is a Conflict.
func (b *Backend) Claim(ctx context.Context, id string, owner sandbox.Owner) (sandbox.Info, error) {
	p, err := b.pod(ctx, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	if p.Labels[sandbox.LabelPool] == "" {
		return sandbox.Info{}, errdefs.FailedPrecondition("sandbox %s is not a pool sandbox and cannot be claimed", id)
	}
	if p.Annotations[sandbox.LabelConversation] != "" {
		return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed by another request", id)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	label := func(k string) string { return "/metadata/labels/" + pointerEscape(k) }
	annot := func(k string) string { return "/metadata/annotations/" + pointerEscape(k) }
	patch, err := json.Marshal([]op{
		{"test", "/metadata/uid", string(p.UID)},
		{"test", annot(sandbox.LabelConversation), ""},
		{"add", label(sandbox.LabelTenant), labelValue(owner.Tenant)},
		{"add", label(sandbox.LabelConversation), labelValue(owner.Conversation)},
		{"add", annot(sandbox.LabelTenant), owner.Tenant},
		{"add", annot(sandbox.LabelConversation), owner.Conversation},
		{"add", annot(sandbox.LabelCreatedAt), time.Now().UTC().Format(time.RFC3339Nano)},
	})
	if err != nil {
		return sandbox.Info{}, errdefs.Internal("cannot encode the claim of pod %s: %v", p.Name, err)
	}
	got, err := b.cs.CoreV1().Pods(b.namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		// A failed test is the usual reason: another claim came first.
		if now, gerr := b.pod(ctx, id); gerr == nil && now.Annotations[sandbox.LabelConversation] != "" {
			return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed by another request", id)
		}
		return sandbox.Info{}, apiErr("record the claim of pod "+p.Name, err)
	}
	return infoOf(got), nil
}

// pointerEscape escapes a map key for a JSON pointer (RFC 6901).
func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
