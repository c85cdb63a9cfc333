package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/errdefs"
)

// maxForks bounds the copies one fork makes.
const maxForks = 100

// snapshotter is the backend's Snapshotter, or a sentence saying there is
// none.
func (m *Manager) snapshotter() (Snapshotter, error) {
	s, ok := m.backend.(Snapshotter)
	if !ok {
		return nil, errdefs.FailedPrecondition("the %s backend cannot take snapshots of a sandbox", m.name)
	}
	return s, nil
}

// Snapshot takes the tenant's sandbox id's files at one consistent point,
// under its conversation's lock (no transition of it runs meanwhile).
func (m *Manager) Snapshot(ctx context.Context, tenant, id, name string) (Snapshot, error) {
	s, err := m.snapshotter()
	if err != nil {
		return Snapshot{}, err
	}
	if len(name) > 200 || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\n") {
		return Snapshot{}, errdefs.InvalidArgument("the snapshot's name must be one line of at most 200 bytes of text")
	}
	var snap Snapshot
	_, err = m.transition(ctx, tenant, id, "snapshot", func(ctx context.Context, info Info) (Info, error) {
		switch info.State {
		case StateRunning, StatePaused, StateHibernated, StateStopped:
		default:
			return Info{}, errdefs.FailedPrecondition("sandbox %s is %s, so no snapshot can be taken of it", id, info.State)
		}
		var err error
		if snap, err = s.Snapshot(ctx, id, SnapshotRequest{Tenant: tenant, Name: name}); err != nil {
			return Info{}, m.backendErr("snapshot sandbox "+id, err)
		}
		m.log.Info("snapshot taken", "snapshot", snap.ID, "sandbox", id, "conversation", info.Conversation, "bytes", snap.SizeBytes)
		return info, nil
	})
	return snap, err
}

// Snapshots lists the tenant's snapshots, newest first.
func (m *Manager) Snapshots(ctx context.Context, tenant string) ([]Snapshot, error) {
	s, err := m.snapshotter()
	if err != nil {
		return nil, err
	}
	all, err := s.Snapshots(ctx)
	if err != nil {
		return nil, m.backendErr("list snapshots", err)
	}
	var out []Snapshot
	for _, sn := range all {
		if sn.Tenant == tenant {
			out = append(out, sn)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// GetSnapshot reads the tenant's snapshot; another tenant's is NotFound.
func (m *Manager) GetSnapshot(ctx context.Context, tenant, snapID string) (Snapshot, error) {
	s, err := m.snapshotter()
	if err != nil {
		return Snapshot{}, err
	}
	sn, err := s.SnapshotOf(ctx, snapID)
	if err == nil && sn.Tenant != tenant {
		err = errdefs.NotFound("snapshot %s does not exist; list your snapshots with GET /v1/snapshots", snapID)
	}
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		err = m.backendErr("read snapshot "+snapID, err)
	}
	return sn, err
}

// DeleteSnapshot removes the tenant's snapshot.
func (m *Manager) DeleteSnapshot(ctx context.Context, tenant, snapID string) error {
	if _, err := m.GetSnapshot(ctx, tenant, snapID); err != nil {
		return err
	}
	s, _ := m.snapshotter()
	if err := s.DeleteSnapshot(ctx, snapID); err != nil {
		return m.backendErr("delete snapshot "+snapID, err)
	}
	m.log.Info("snapshot deleted", "snapshot", snapID, "tenant", tenant)
	return nil
}

// ForkFailure is one copy a fork could not make, and why.
type ForkFailure struct {
	Conversation string
	Err          error
}

// Fork makes one sandbox per conversation from one consistent point of the
// tenant's sandbox id (a snapshot, kept and listed, named after the fork),
// each with the source's network, egress and lifecycle; the source keeps
// running. Copies that fail are returned with why, and leave no sandbox;
// when none is made the snapshot is removed again.
func (m *Manager) Fork(ctx context.Context, tenant, id string, conversations []string) (Snapshot, []Info, []ForkFailure, error) {
	switch {
	case len(conversations) == 0:
		return Snapshot{}, nil, nil, errdefs.InvalidArgument("conversations is empty; name one conversation per copy")
	case len(conversations) > maxForks:
		return Snapshot{}, nil, nil, errdefs.InvalidArgument("%d copies asked; a fork makes at most %d", len(conversations), maxForks)
	}
	seen := map[string]bool{}
	for _, c := range conversations {
		if err := ValidateConversation(c); err != nil {
			return Snapshot{}, nil, nil, err
		}
		if seen[c] {
			return Snapshot{}, nil, nil, errdefs.InvalidArgument("conversation %q is named twice; each copy needs its own", c)
		}
		seen[c] = true
	}
	src, err := m.Get(ctx, tenant, id)
	if err != nil {
		return Snapshot{}, nil, nil, err
	}
	// A conversation that has a sandbox already fails before anything is
	// copied (a create racing the fork still fails its copy alone).
	for _, c := range conversations {
		if have, err := m.Lookup(ctx, tenant, c); err == nil {
			return Snapshot{}, nil, nil, errdefs.Conflict("conversation %s already has a sandbox (%s); fork into conversations that have none", c, have.ID)
		}
	}
	snap, err := m.Snapshot(ctx, tenant, id, fmt.Sprintf("fork of %s (%s)", id, src.Conversation))
	if err != nil {
		return Snapshot{}, nil, nil, err
	}
	egress, _ := EgressOf(src)
	spec := Spec{Tenant: tenant, Snapshot: snap.ID, Network: NetworkOf(src)}
	if spec.Network == NetworkProxy {
		spec.Egress = &egress
	}
	spec.Lifecycle, _ = LifecycleOf(src)
	spec.Labels = ExtLabels(src)
	spec.Setuid = SetuidOf(src)
	spec.Runtime = RuntimeOf(src)
	spec.ReadOnlyRoot = ReadOnlyRootOf(src)
	var made []Info
	var failed []ForkFailure
	for _, conv := range conversations {
		s := spec
		s.Conversation = conv
		info, err := m.Create(ctx, s)
		if err != nil {
			failed = append(failed, ForkFailure{Conversation: conv, Err: err})
			continue
		}
		made = append(made, info)
	}
	if len(made) == 0 {
		// Nothing started from it: the snapshot is not kept.
		if s, err := m.snapshotter(); err == nil {
			if err := s.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID); err != nil {
				m.log.Warn("cannot remove the snapshot of a fork that made no copy", "snapshot", snap.ID, "err", err)
			}
		}
	}
	return snap, made, failed, nil
}
