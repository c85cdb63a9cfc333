package containerd

import (
	"context"

	"github.com/sandboxd/sandboxd/sandbox"
)

var _ sandbox.Annotator = (*Backend)(nil)

// Annotate sets a label on sandbox id's container record (containerd's
// labels, unlike Docker's, can change).
func (b *Backend) Annotate(ctx context.Context, id, key, value string) error {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return err
	}
	if _, err := c.SetLabels(ctx, map[string]string{key: value}); err != nil {
		return engineErr("label sandbox "+id, err)
	}
	return nil
}
