package docker

import (
	"context"
	"maps"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A container's labels cannot change after it was made, so the claim of a
// pool sandbox is recorded in a volume of its own, named after the sandbox
// and labelled with the owner: the engine keeps it across sandboxd
// restarts, every replica on the engine sees it, and List and Inspect lay
// its labels over the container's. Creating a volume whose name exists
// returns the existing one, labels unchanged, so the token label tells
// which of two racing claims won. The volume is never mounted; Remove
// removes it with the container.
const (
	// ClaimVolumePrefix starts the name of a claim record, followed by the
	// sandbox id (container names, and so sandbox ids, are unique on an
	// engine).
	ClaimVolumePrefix = "sandboxd-claim-"
	// LabelClaimOf is the claimed sandbox's id, on the record.
	LabelClaimOf = "io.sandboxd.claim-of"
	// labelClaimToken is the claim's random token, on the record.
	labelClaimToken = "io.sandboxd.claim-token"
	// orphanAge is how old a record of a vanished container must be
	// before List removes it: a record is made only after its container,
	// but a listing may have missed a container made just then.
	orphanAge = time.Minute
)

var _ sandbox.Claimer = (*Backend)(nil)

func claimVolume(id string) string { return ClaimVolumePrefix + id }

// Claim records owner as the owner of the unclaimed pool sandbox warm:
// one engine call, the record's creation.
func (b *Backend) Claim(ctx context.Context, warm sandbox.Info, owner sandbox.Owner) (sandbox.Info, error) {
	switch {
	case !validID(warm.ID) || !b.dep.Owns(warm.Labels):
		return sandbox.Info{}, errdefs.NotFound("sandbox %s does not exist in the Docker engine", warm.ID)
	case warm.Labels[sandbox.LabelPool] == "":
		return sandbox.Info{}, errdefs.FailedPrecondition("sandbox %s is not a pool sandbox and cannot be claimed", warm.ID)
	case warm.Conversation != "":
		return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed already", warm.ID)
	}
	token := newID() + newID()
	labels := map[string]string{
		LabelClaimOf:              warm.ID,
		labelClaimToken:           token,
		sandbox.LabelDeployment:   b.dep.Name,
		sandbox.LabelTenant:       owner.Tenant,
		sandbox.LabelConversation: owner.Conversation,
		sandbox.LabelCreatedAt:    time.Now().UTC().Format(time.RFC3339Nano),
	}
	for k, v := range owner.Labels {
		if sandbox.IsClaimLabel(k) {
			labels[k] = v
		}
	}
	v, err := b.cli.VolumeCreate(ctx, volume.CreateOptions{Name: claimVolume(warm.ID), Driver: "local", Labels: labels})
	if err != nil {
		return sandbox.Info{}, engineErr("record the claim of pool sandbox "+warm.ID, err)
	}
	if v.Labels[labelClaimToken] != token {
		return sandbox.Info{}, errdefs.Conflict("pool sandbox %s was claimed by another request", warm.ID)
	}
	info := warm
	info.Labels = withClaim(warm.Labels, labels)
	info.Tenant, info.Conversation = owner.Tenant, owner.Conversation
	if at, err := time.Parse(time.RFC3339Nano, labels[sandbox.LabelCreatedAt]); err == nil {
		info.CreatedAt = at.UTC()
	}
	return info, nil
}

// withClaim lays a claim record's owner over a container's labels.
func withClaim(labels, claim map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range []string{sandbox.LabelTenant, sandbox.LabelConversation, sandbox.LabelCreatedAt} {
		out[k] = claim[k]
	}
	for k, v := range claim {
		if sandbox.IsClaimLabel(k) {
			out[k] = v
		}
	}
	return out
}

// claimOf returns the claim record of pool sandbox id; nil when it has
// none.
func (b *Backend) claimOf(ctx context.Context, id string) (map[string]string, error) {
	v, err := b.cli.VolumeInspect(ctx, claimVolume(id))
	switch {
	case cerrdefs.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, engineErr("read the claim of pool sandbox "+id, err)
	case v.Labels[LabelClaimOf] != id || v.Labels[sandbox.LabelDeployment] != b.dep.Name:
		return nil, nil
	}
	return v.Labels, nil
}

// claims returns the deployment's claim records by sandbox id.
func (b *Backend) claims(ctx context.Context) (map[string]volume.Volume, error) {
	f := filters.NewArgs(filters.Arg("label", LabelClaimOf), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))
	vs, err := b.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr("list claim records", err)
	}
	out := make(map[string]volume.Volume, len(vs.Volumes))
	for _, v := range vs.Volumes {
		if v != nil && v.Name == claimVolume(v.Labels[LabelClaimOf]) {
			out[v.Labels[LabelClaimOf]] = *v
		}
	}
	return out, nil
}

// dropOrphanClaims removes the records whose container is gone (removed
// outside sandboxd), once they are old enough that no listing can have
// missed their container.
func (b *Backend) dropOrphanClaims(ctx context.Context, records map[string]volume.Volume, listed map[string]bool) {
	for id, v := range records {
		at, err := time.Parse(time.RFC3339Nano, v.Labels[sandbox.LabelCreatedAt])
		if listed[id] || err != nil || time.Since(at) < orphanAge {
			continue
		}
		if err := b.cli.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
			b.log.Debug("cannot remove the claim record of a vanished sandbox", "volume", v.Name, "err", err)
		}
	}
}

// removeClaim removes the claim record of c (sandbox id), if any.
func (b *Backend) removeClaim(ctx context.Context, id string, c container.InspectResponse) error {
	if c.Config == nil || c.Config.Labels[sandbox.LabelPool] == "" {
		return nil
	}
	if err := b.cli.VolumeRemove(ctx, claimVolume(id), true); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("remove the claim record of sandbox "+id, err)
	}
	return nil
}
