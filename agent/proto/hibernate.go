package proto

import "syscall"

// SignalHibernate is what a hibernation sends the sandbox's PID 1 (the
// agent's init): it records every process it owns that still runs as
// stopped by hibernation, kills them and exits with ExitHibernated. The
// records survive the container's stop and start, so the agent that starts
// on waking reports them.
//
// What the daemon started at the wake reports, once per hibernation (it
// consumes the record at start; a later restart without a new hibernation
// finds none):
//   - each long-lived process (the proc_ ops) that was running, under its
//     own id, as ProcInfo{State: ProcStopped, Hibernated: true}, with the
//     newest of its output (up to 16 MiB shared by every process; a process
//     whose older bytes did not fit reads them as Dropped). Ids given out
//     before the hibernation are never given out again.
//   - each spawned process (a kernel, a language server) that was running,
//     under its own id and labels, as ProcessInfo{Running: false,
//     Hibernated: true}, without output.
//
// Both stay listed like any ended process (the retention counting from the
// wake), and a record not yet forgotten is recorded again by a later
// hibernation, so a kernel stopped by one is still reported after the next.
const SignalHibernate = syscall.SIGPWR

// ExitHibernated is the init's exit status after SignalHibernate
// (EX_TEMPFAIL: it will be started again). An engine that keeps a stopped
// container's exit status (Docker) tells a hibernated sandbox by it.
const ExitHibernated = 75
