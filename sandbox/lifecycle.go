package sandbox

import (
	"context"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// The lifecycle: a running sandbox can be paused (every process frozen in
// memory, no CPU) or hibernated (every process stopped and its memory
// freed, its files kept: the workspace and the sandbox's own file system
// changes), and resumed from either. Each state is the engine's own, so a
// restarted sandboxd or another replica reads it truly.

// StateHibernated is a sandbox whose processes were stopped for a
// hibernation; resuming it starts its agent again on the same files.
const StateHibernated = "hibernated"

// SignalHibernate and ExitHibernated mark a hibernation in the engine
// (proto.SignalHibernate).
const (
	SignalHibernate = proto.SignalHibernate
	ExitHibernated  = proto.ExitHibernated
)

// LabelPausedAt marks, in Info.Labels, a sandbox paused through Freezer.Pause
// (RFC 3339), as the backend records it: a call resumes such a sandbox,
// while one paused in the engine by someone else is reported with the way
// to unpause it.
const LabelPausedAt = "io.sandboxd.paused-at"

// Freezer is an optional Backend capability: freezing every process of a
// sandbox (the cgroup freezer) and thawing it. Both are idempotent: pausing
// a paused sandbox or unpausing a running one succeeds and changes nothing.
// Inspect and List report StatePaused while it is frozen, with
// LabelPausedAt for a pause made by Pause.
type Freezer interface {
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

// Hibernator is an optional Backend capability. Hibernate stops every
// process of a running (or paused) sandbox and frees its memory, keeping
// its files; from its return on Inspect and List report StateHibernated,
// to every replica and after a restart. Wake starts a hibernated sandbox
// again (its agent's init first, as at creation) and returns once the
// engine says it runs; the caller opens the agent's pipe. Both are
// idempotent.
type Hibernator interface {
	Hibernate(ctx context.Context, id string) error
	Wake(ctx context.Context, id string) error
}

// HibernationChecker is an optional Hibernator capability: whether one
// sandbox can hibernate (a Kubernetes sandbox only with a workspace claim).
// The idle lifecycle skips a hibernation it cannot take, and a refused
// hibernation leaves the sandbox's pipe open.
type HibernationChecker interface {
	Hibernatable(info Info) bool
}
