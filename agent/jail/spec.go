// Package jail confines a program on the host: `sandbox-agent jail` runs it
// as an unprivileged uid in its own mount, PID, network, IPC and UTS
// namespaces, over a root that holds only the system directories an
// interpreter needs (read-only), a minimal /etc, the paths it was given
// read-only, and one scratch directory it may write; under memory, CPU and
// pids limits (cgroups, rlimits where no cgroup can be made), with
// no_new_privs and no capabilities. sandboxd runs host kernels this way.
//
// Three processes make a jail: the outer one (what the agent spawned: it
// makes the cgroup, starts the rest and reports how they ended), the jail's
// init (PID 1 of the new namespaces: builds the root, then reaps and
// forwards signals) and the program. Killing the outer one kills the rest:
// init has it as its parent-death signal, and the program and everything it
// started die with their PID namespace's init.
package jail

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Spec is one jail: who runs what, what it sees and what it may use.
type Spec struct {
	UID, GID int
	// Scratch is the one writable directory, at the same path inside; it is
	// also HOME, and TMPDIR is its .tmp folder (/tmp itself is read-only).
	Scratch string
	// ReadOnly are more host paths shown read-only at the same paths.
	ReadOnly []string
	// Network keeps the host's network; without it the jail has its own
	// network namespace with only loopback.
	Network bool
	// MemoryBytes, Pids and CPUs cap the jail as a whole (0: no cap);
	// FileBytes caps one file's size.
	MemoryBytes int64
	Pids        int
	CPUs        float64
	FileBytes   int64
	// Fds is how many descriptors from 3 on are handed to the program.
	Fds int
	// Env is the program's environment beyond PATH, HOME, TMPDIR, LANG and
	// USER; nothing of the caller's own environment gets in.
	Env []string
	// Argv is the program; a bare name is looked up on the jail's PATH.
	Argv []string

	// memoryRlimit tells init that no cgroup caps the memory, so it sets
	// RLIMIT_AS (the outer process passes it when it could make none).
	memoryRlimit bool
}

// Args renders s as the jail subcommand's arguments (after "jail").
func (s *Spec) Args() []string {
	a := []string{"--uid", strconv.Itoa(s.UID), "--gid", strconv.Itoa(s.GID), "--scratch", s.Scratch}
	for _, p := range s.ReadOnly {
		a = append(a, "--ro", p)
	}
	if s.Network {
		a = append(a, "--network")
	}
	if s.MemoryBytes > 0 {
		a = append(a, "--memory", strconv.FormatInt(s.MemoryBytes, 10))
	}
	if s.Pids > 0 {
		a = append(a, "--pids", strconv.Itoa(s.Pids))
	}
	if s.CPUs > 0 {
		a = append(a, "--cpus", strconv.FormatFloat(s.CPUs, 'g', -1, 64))
	}
	if s.FileBytes > 0 {
		a = append(a, "--file-size", strconv.FormatInt(s.FileBytes, 10))
	}
	if s.Fds > 0 {
		a = append(a, "--fds", strconv.Itoa(s.Fds))
	}
	for _, e := range s.Env {
		a = append(a, "--env", e)
	}
	return append(append(a, "--"), s.Argv...)
}

// maxFds bounds --fds (the agent hands out at most 16 extra pipes).
const maxFds = 16

// Parse reads the subcommand's arguments; init is set for the jail's own
// second stage.
func Parse(args []string) (s *Spec, init bool, err error) {
	s = &Spec{UID: -1, GID: -1}
	fs := flag.NewFlagSet("jail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&s.UID, "uid", -1, "")
	fs.IntVar(&s.GID, "gid", -1, "")
	fs.StringVar(&s.Scratch, "scratch", "", "")
	fs.Func("ro", "", func(v string) error { s.ReadOnly = append(s.ReadOnly, v); return nil })
	fs.BoolVar(&s.Network, "network", false, "")
	fs.Int64Var(&s.MemoryBytes, "memory", 0, "")
	fs.IntVar(&s.Pids, "pids", 0, "")
	fs.Float64Var(&s.CPUs, "cpus", 0, "")
	fs.Int64Var(&s.FileBytes, "file-size", 0, "")
	fs.IntVar(&s.Fds, "fds", 0, "")
	fs.Func("env", "", func(v string) error { s.Env = append(s.Env, v); return nil })
	fs.BoolVar(&init, "init", false, "")
	fs.BoolVar(&s.memoryRlimit, "memory-rlimit", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, false, fmt.Errorf("%v; usage: jail --uid N --gid N --scratch DIR [--ro PATH]... [--network] [--memory BYTES] [--pids N] [--cpus N] [--file-size BYTES] [--fds N] [--env K=V]... -- PROGRAM ARGS", err)
	}
	s.Argv = fs.Args()
	return s, init, s.check()
}

func (s *Spec) check() error {
	switch {
	case s.UID <= 0 || s.GID <= 0:
		return errors.New("--uid and --gid must be given and above 0: a jail never runs its program as root")
	case s.Scratch == "" || !filepath.IsAbs(s.Scratch) || filepath.Clean(s.Scratch) != s.Scratch || s.Scratch == "/":
		return fmt.Errorf("--scratch %q must be a clean absolute path below /", s.Scratch)
	case len(s.Argv) == 0 || s.Argv[0] == "":
		return errors.New("no program given; put it after --")
	case s.Fds < 0 || s.Fds > maxFds:
		return fmt.Errorf("--fds is %d; give 0 to %d", s.Fds, maxFds)
	case s.MemoryBytes < 0 || s.Pids < 0 || s.CPUs < 0 || s.FileBytes < 0:
		return errors.New("--memory, --pids, --cpus and --file-size must not be negative")
	}
	for _, p := range s.ReadOnly {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("--ro %q must be a clean absolute path below /", p)
		}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return fmt.Errorf("--env %q is not NAME=VALUE", e)
		}
	}
	return nil
}
