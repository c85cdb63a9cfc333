package sandbox

import (
	"context"
	"syscall"
)

// The lifecycle: a running sandbox can be paused (every process frozen in
// memory, no CPU) or hibernated (every process stopped and its memory
// freed, its files kept: the workspace and the sandbox's own file system
// changes), and resumed from either. Each state is the engine's own, so a
// restarted sandboxd or another replica reads it truly.

// StateHibernated is a sandbox whose processes were stopped for a
// hibernation; resuming it starts its agent again on the same files.
const StateHibernated = "hibernated"

// SignalHibernate is what a hibernation sends the sandbox's PID 1 (the
// agent's init): it records its processes as stopped by hibernation, kills
// them and exits with ExitHibernated. An engine that keeps a stopped
// container's exit status (Docker) reports StateHibernated by it.
const SignalHibernate = syscall.SIGPWR

// ExitHibernated is the agent's init's exit status after SignalHibernate
// (EX_TEMPFAIL: it will be started again).
const ExitHibernated = 75

// Freezer is an optional Backend capability: freezing every process of a
// sandbox (the cgroup freezer) and thawing it. Both are idempotent: pausing
// a paused sandbox or unpausing a running one succeeds and changes nothing.
// Inspect and List report StatePaused while it is frozen.
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
