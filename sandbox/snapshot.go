package sandbox

import (
	"context"
	"time"
)

// Snapshot is a sandbox's files taken at one consistent point: its
// workspace and, where the engine can commit one, its own file system
// changes (installed packages). Processes and memory are never part of it:
// memory checkpointing does not work on the engines served here.
type Snapshot struct {
	ID           string
	Tenant       string
	Sandbox      string // the sandbox it was taken of
	Conversation string // that sandbox's conversation
	Name         string
	CreatedAt    time.Time
	SizeBytes    int64
	// Holds says what it holds, for the API's response: HoldsFilesystem or
	// HoldsWorkspace.
	Holds string
}

// What a snapshot holds.
const (
	HoldsFilesystem = "filesystem and workspace"
	HoldsWorkspace  = "workspace"
)

// SnapshotRequest names a snapshot and its tenant.
type SnapshotRequest struct {
	Tenant string
	Name   string
}

// Snapshotter is an optional Backend capability. Snapshot takes sandbox
// id's files at one consistent point (frozen for as long as it needs,
// never a torn copy of a file being written) and leaves the sandbox in the
// state it found it. Snapshots lists the deployment's snapshots, SnapshotOf
// reads one (NotFound when it is gone or half-made), DeleteSnapshot removes
// one; sandboxes made from it keep their files. Create with Spec.Snapshot
// set makes a sandbox from a snapshot. A snapshot half-made when sandboxd
// died is never listed and is removed by the backend.
type Snapshotter interface {
	Snapshot(ctx context.Context, id string, req SnapshotRequest) (Snapshot, error)
	Snapshots(ctx context.Context) ([]Snapshot, error)
	SnapshotOf(ctx context.Context, snapID string) (Snapshot, error)
	DeleteSnapshot(ctx context.Context, snapID string) error
}
