package docker

import (
	"context"
	"maps"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandboxd/sandboxd/sandbox"
)

// A pause or a hibernation made through sandboxd is recorded, as a claim
// is (claim.go), in a volume named after the sandbox and labelled with the
// time: the engine keeps no time for a pause, sandboxd must tell its own
// pauses (which a call resumes) from one made in the engine by someone else
// (which it reports, with the way to unpause), and a hibernation whose
// agent had to be killed must still read as one. The record is made before
// the engine is asked and removed after the way back; it is never mounted.
const (
	// PauseVolumePrefix and HibernateVolumePrefix start the names of the
	// records, followed by the sandbox id.
	PauseVolumePrefix     = "sandboxd-pause-"
	HibernateVolumePrefix = "sandboxd-hibernate-"
	// LabelRecordOf is the sandbox's id, on a record.
	LabelRecordOf = "io.sandboxd.record-of"
	// labelRecordAt is the record's time (RFC 3339).
	labelRecordAt = "io.sandboxd.record-at"
)

// record makes id's record of prefix's kind.
func (b *Backend) record(ctx context.Context, prefix, id string) error {
	_, err := b.cli.VolumeCreate(ctx, volume.CreateOptions{Name: prefix + id, Driver: "local", Labels: map[string]string{
		LabelRecordOf:           id,
		sandbox.LabelDeployment: b.dep.Name,
		labelRecordAt:           time.Now().UTC().Format(time.RFC3339Nano),
	}})
	if err != nil {
		return engineErr("record the state of sandbox "+id, err)
	}
	return nil
}

// drop removes id's record of prefix's kind, if any.
func (b *Backend) drop(ctx context.Context, prefix, id string) {
	if err := b.cli.VolumeRemove(ctx, prefix+id, true); err != nil && !cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot remove a sandbox's state record", "volume", prefix+id, "err", err)
	}
}

// recordOf is the time in id's record of prefix's kind; "" without one.
func (b *Backend) recordOf(ctx context.Context, prefix, id string) string {
	v, err := b.cli.VolumeInspect(ctx, prefix+id)
	if err != nil || v.Labels[LabelRecordOf] != id || v.Labels[sandbox.LabelDeployment] != b.dep.Name {
		return ""
	}
	return v.Labels[labelRecordAt]
}

// records returns the deployment's records of prefix's kind: the time by
// sandbox id.
func (b *Backend) records(ctx context.Context, prefix string) (map[string]string, error) {
	f := filters.NewArgs(filters.Arg("label", LabelRecordOf), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))
	vs, err := b.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr("list state records", err)
	}
	out := make(map[string]string, len(vs.Volumes))
	for _, v := range vs.Volumes {
		if v != nil && v.Name == prefix+v.Labels[LabelRecordOf] {
			out[v.Labels[LabelRecordOf]] = v.Labels[labelRecordAt]
		}
	}
	return out, nil
}

// withRecord lays a record over a sandbox's Info: a paused one's pause
// (LabelPausedAt and its time), a stopped one's hibernation (the state
// and its time).
func withRecord(i sandbox.Info, pausedAt, hibernatedAt string) sandbox.Info {
	switch {
	case i.State == sandbox.StatePaused && pausedAt != "":
		i.Labels = maps.Clone(i.Labels)
		if i.Labels == nil {
			i.Labels = map[string]string{}
		}
		i.Labels[sandbox.LabelPausedAt] = pausedAt
		i.StateSince = parseTime(pausedAt)
	case (i.State == sandbox.StateStopped || i.State == sandbox.StateHibernated) && hibernatedAt != "":
		i.State = sandbox.StateHibernated
		i.StateSince = parseTime(hibernatedAt)
	}
	return i
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
