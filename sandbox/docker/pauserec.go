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

// A pause made through sandboxd is recorded, as a claim is (claim.go), in
// a volume named after the sandbox and labelled with the time: the engine
// keeps no time for a pause, and sandboxd must tell its own pauses (which a
// call resumes) from one made in the engine by someone else (which it
// reports, with the way to unpause). The record is made before the freeze
// and removed after the thaw; it is never mounted.
const (
	// PauseVolumePrefix starts the name of a pause record, followed by the
	// sandbox id.
	PauseVolumePrefix = "sandboxd-pause-"
	// LabelPauseOf is the paused sandbox's id, on the record.
	LabelPauseOf = "io.sandboxd.pause-of"
)

func pauseVolume(id string) string { return PauseVolumePrefix + id }

// recordPause makes id's pause record.
func (b *Backend) recordPause(ctx context.Context, id string) error {
	_, err := b.cli.VolumeCreate(ctx, volume.CreateOptions{Name: pauseVolume(id), Driver: "local", Labels: map[string]string{
		LabelPauseOf:            id,
		sandbox.LabelDeployment: b.dep.Name,
		sandbox.LabelPausedAt:   time.Now().UTC().Format(time.RFC3339Nano),
	}})
	if err != nil {
		return engineErr("record the pause of sandbox "+id, err)
	}
	return nil
}

// dropPause removes id's pause record, if any.
func (b *Backend) dropPause(ctx context.Context, id string) {
	if err := b.cli.VolumeRemove(ctx, pauseVolume(id), true); err != nil && !cerrdefs.IsNotFound(err) {
		b.log.Warn("cannot remove a sandbox's pause record", "id", id, "err", err)
	}
}

// pauseOf is the time in id's pause record; "" without one.
func (b *Backend) pauseOf(ctx context.Context, id string) string {
	v, err := b.cli.VolumeInspect(ctx, pauseVolume(id))
	if err != nil || v.Labels[LabelPauseOf] != id || v.Labels[sandbox.LabelDeployment] != b.dep.Name {
		return ""
	}
	return v.Labels[sandbox.LabelPausedAt]
}

// pauses returns the deployment's pause records: the time by sandbox id.
func (b *Backend) pauses(ctx context.Context) (map[string]string, error) {
	f := filters.NewArgs(filters.Arg("label", LabelPauseOf), filters.Arg("label", sandbox.LabelDeployment+"="+b.dep.Name))
	vs, err := b.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, engineErr("list pause records", err)
	}
	out := make(map[string]string, len(vs.Volumes))
	for _, v := range vs.Volumes {
		if v != nil && v.Name == pauseVolume(v.Labels[LabelPauseOf]) {
			out[v.Labels[LabelPauseOf]] = v.Labels[sandbox.LabelPausedAt]
		}
	}
	return out, nil
}

// withPause marks a paused sandbox's Info with its record's time.
func withPause(i sandbox.Info, at string) sandbox.Info {
	if at == "" || i.State != sandbox.StatePaused {
		return i
	}
	i.Labels = maps.Clone(i.Labels)
	if i.Labels == nil {
		i.Labels = map[string]string{}
	}
	i.Labels[sandbox.LabelPausedAt] = at
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		i.StateSince = t.UTC()
	}
	return i
}
