package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

var _ sandbox.Claimer = (*Backend)(nil)

// Claim hands the unclaimed pool pod warm to owner by patching its tenant
// and conversation labels and annotations in place: one API call. The JSON
// patch first tests that the pod is still the deployment's pool pod with
// an empty conversation, so of two racing claims (two replicas) the API
// server applies one; the other is a Conflict.
func (b *Backend) Claim(ctx context.Context, warm sandbox.Info, owner sandbox.Owner) (sandbox.Info, error) {
	switch {
	case !validID(warm.ID) || !b.dep.Owns(warm.Labels):
		return sandbox.Info{}, errdefs.NotFound("sandbox %s does not exist in namespace %s", warm.ID, b.namespace)
	case warm.Labels[sandbox.LabelPool] == "":
		return sandbox.Info{}, errdefs.FailedPrecondition("sandbox %s is not a pool sandbox and cannot be claimed", warm.ID)
	case warm.Conversation != "":
		return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed already", warm.ID)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	label := func(k string) string { return "/metadata/labels/" + pointerEscape(k) }
	annot := func(k string) string { return "/metadata/annotations/" + pointerEscape(k) }
	ops := []op{
		{"test", label(sandbox.LabelPool), warm.Labels[sandbox.LabelPool]},
		{"test", label(sandbox.LabelDeployment), b.dep.Name},
		{"test", annot(sandbox.LabelConversation), ""},
		{"add", label(sandbox.LabelTenant), labelValue(owner.Tenant)},
		{"add", label(sandbox.LabelConversation), labelValue(owner.Conversation)},
		{"add", annot(sandbox.LabelTenant), owner.Tenant},
		{"add", annot(sandbox.LabelConversation), owner.Conversation},
		{"add", annot(sandbox.LabelCreatedAt), time.Now().UTC().Format(time.RFC3339Nano)},
	}
	for _, k := range slices.Sorted(maps.Keys(owner.Labels)) {
		if sandbox.IsClaimLabel(k) {
			ops = append(ops, op{"add", annot(k), owner.Labels[k]}) // JSON: annotations, as at creation
		}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return sandbox.Info{}, errdefs.Internal("cannot encode the claim of sandbox %s: %v", warm.ID, err)
	}
	name := b.PodName(warm.ID)
	got, err := b.cs.CoreV1().Pods(b.namespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		// A failed test is the usual reason: another claim came first.
		p, gerr := b.pod(ctx, warm.ID)
		switch {
		case gerr != nil && errors.Is(gerr, errdefs.ErrNotFound):
			return sandbox.Info{}, gerr
		case gerr == nil && p.Annotations[sandbox.LabelConversation] != "":
			return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed by another request", warm.ID)
		}
		return sandbox.Info{}, apiErr("record the claim of pod "+name, err)
	}
	if c := claimOf(got); c != "" {
		// The workspace claim must say the same, or a pod made again on
		// it after a hibernation would be a pool sandbox again, free for
		// anyone to claim. Without it the sandbox must not be handed out:
		// the caller removes it.
		if _, err := b.cs.CoreV1().PersistentVolumeClaims(b.namespace).Patch(ctx, c, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			return sandbox.Info{}, apiErr("record the claim of pool sandbox "+warm.ID+" on its workspace claim "+c, err)
		}
	}
	return infoOf(got), nil
}

// pointerEscape escapes a map key for a JSON pointer (RFC 6901).
func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
