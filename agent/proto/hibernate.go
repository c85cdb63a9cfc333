package proto

import "syscall"

// SignalHibernate is what a hibernation sends the sandbox's PID 1 (the
// agent's init): it records every process it owns that still runs as
// stopped by hibernation, kills them and exits with ExitHibernated. The
// records survive the container's stop and start, so the agent that starts
// on waking reports them.
const SignalHibernate = syscall.SIGPWR

// ExitHibernated is the init's exit status after SignalHibernate
// (EX_TEMPFAIL: it will be started again). An engine that keeps a stopped
// container's exit status (Docker) tells a hibernated sandbox by it.
const ExitHibernated = 75
