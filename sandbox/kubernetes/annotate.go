package kubernetes

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxd/sandboxd/sandbox"
)

var _ sandbox.Annotator = (*Backend)(nil)

// Annotate sets an annotation on sandbox id's pod, and on its workspace
// claim if it has one, so that a pod made again on the claim carries it;
// infoOf reports the keys it knows (sandbox.LabelEgressChange) among the
// labels.
func (b *Backend) Annotate(ctx context.Context, id, key, value string) error {
	o, err := b.find(ctx, id)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if p := o.pod; p != nil && p.DeletionTimestamp == nil {
		if _, err := b.cs.CoreV1().Pods(b.namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return apiErr("annotate pod "+p.Name, err)
		}
	}
	name := claimOf(o.pod)
	if o.claim != nil {
		name = o.claim.Name
	}
	if name == "" {
		return nil
	}
	return b.patchClaimAnnotation(ctx, name, key, value)
}
