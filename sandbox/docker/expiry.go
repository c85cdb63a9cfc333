package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox's expiry (sandbox.LabelExpiry) is stamped on its container at
// creation; Docker cannot change a container's labels, so a later change
// is recorded, as a pause is (pauserec.go), in a volume labelled with it,
// which List and Inspect lay over the container's label. A volume's labels
// cannot change either: each change makes a new record, named with its
// time so that the newest wins, and then removes the older ones, so a
// crash between the two leaves the new one in force.

// ExpiryVolumePrefix starts the name of an expiry record, followed by the
// sandbox id, "-" and the record's time (16 hex digits of Unix ns).
const ExpiryVolumePrefix = "sandboxd-expiry-"

var _ sandbox.ExpiryRecorder = (*Backend)(nil)

// RecordExpiry records value as sandbox id's expiry label.
func (b *Backend) RecordExpiry(ctx context.Context, id, value string) error {
	if _, err := b.inspect(ctx, id); err != nil {
		return err
	}
	name := fmt.Sprintf("%s%s-%016x", ExpiryVolumePrefix, id, time.Now().UnixNano())
	_, err := b.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: map[string]string{
		LabelRecordOf:           id,
		sandbox.LabelDeployment: b.dep.Name,
		labelRecordAt:           time.Now().UTC().Format(time.RFC3339Nano),
		sandbox.LabelExpiry:     value,
	}})
	if err != nil {
		return engineErr("record the expiry of sandbox "+id, err)
	}
	vs, err := b.expiryRecords(ctx, id)
	if err != nil {
		return nil // the new record is in force; the old ones go with the sandbox
	}
	for _, v := range vs {
		if v.Name < name {
			b.removeVolume(ctx, v.Name)
		}
	}
	return nil
}

// expiryRecords are the deployment's expiry records, of sandbox id only
// when id is not "".
func (b *Backend) expiryRecords(ctx context.Context, id string) ([]*volume.Volume, error) {
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelExpiry), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))
	if id != "" {
		f.Add("label", LabelRecordOf+"="+id)
	}
	vs, err := b.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr("list expiry records", err)
	}
	out := vs.Volumes[:0]
	for _, v := range vs.Volumes {
		if v != nil && strings.HasPrefix(v.Name, ExpiryVolumePrefix+v.Labels[LabelRecordOf]+"-") {
			out = append(out, v)
		}
	}
	return out, nil
}

// newestExpiries is the newest record of each sandbox among vs.
func newestExpiries(vs []*volume.Volume) map[string]*volume.Volume {
	out := map[string]*volume.Volume{}
	for _, v := range vs {
		id := v.Labels[LabelRecordOf]
		if cur, ok := out[id]; !ok || cur.Name < v.Name {
			out[id] = v
		}
	}
	return out
}

// withExpiry lays the record v (nil: none) over i's expiry label.
func withExpiry(i sandbox.Info, v *volume.Volume) sandbox.Info {
	if v == nil {
		return i
	}
	labels := make(map[string]string, len(i.Labels)+1)
	for k, val := range i.Labels {
		labels[k] = val
	}
	labels[sandbox.LabelExpiry] = v.Labels[sandbox.LabelExpiry]
	i.Labels = labels
	return i
}

// expiryOf is sandbox id's newest expiry record; nil without one (or when
// the records cannot be read: the container's label then says).
func (b *Backend) expiryOf(ctx context.Context, id string) *volume.Volume {
	vs, err := b.expiryRecords(ctx, id)
	if err != nil {
		b.log.Warn("cannot read a sandbox's expiry records; its expiry at creation is reported", "sandbox", id, "err", err)
		return nil
	}
	return newestExpiries(vs)[id]
}

// dropExpiries removes sandbox id's expiry records.
func (b *Backend) dropExpiries(ctx context.Context, id string) {
	vs, err := b.expiryRecords(ctx, id)
	if err != nil {
		b.log.Warn("cannot list a removed sandbox's expiry records; List removes them later", "sandbox", id, "err", err)
		return
	}
	for _, v := range vs {
		b.removeVolume(ctx, v.Name)
	}
}

// dropOrphanExpiries removes the records whose sandbox is not listed and
// that are old enough not to be of a sandbox made after the listing.
func (b *Backend) dropOrphanExpiries(ctx context.Context, vs []*volume.Volume, listed map[string]bool) {
	for _, v := range vs {
		at, err := time.Parse(time.RFC3339Nano, v.Labels[labelRecordAt])
		if listed[v.Labels[LabelRecordOf]] || err != nil || time.Since(at) < orphanAge {
			continue
		}
		b.removeVolume(ctx, v.Name)
	}
}

func (b *Backend) removeVolume(ctx context.Context, name string) {
	if err := b.cli.VolumeRemove(ctx, name, true); err != nil && !cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot remove a sandbox's record", "volume", name, "err", err)
	}
}
