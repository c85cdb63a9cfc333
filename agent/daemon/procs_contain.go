package daemon

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ContainCommand is the agent subcommand that supervises one exec call.
const ContainCommand = "contain"

// containFD is the supervisor's status pipe to the agent.
const containFD = 3

// containAs begins contain's optional first argument, the credential the
// command runs with (credArg's form), for an exec as an account.
const containAs = "--as="

// maxNamedLeft bounds how many pids of background processes are named.
const maxNamedLeft = 16

// supervisorThreads is the supervisor's thread reserve (see reserveThreads).
const supervisorThreads = 2

// supervisorHeap is the heap at which the supervisor collects garbage.
const supervisorHeap = 32 << 20

// RunContain is `sandbox-agent contain [--as=UID:GID:GROUPS] TIMEOUT PATH
// -- ARGV...`, which the agent runs for every exec call (see
// supervisedCall). It makes itself a child subreaper, so every process the
// command starts stays below it whatever it does (setsid, double fork,
// nohup): an orphan is re-parented to the nearest living subreaper
// ancestor, which is the supervisor. It starts PATH with ARGV in a process
// group of its own on the stdio it was given (with --as, as that user,
// entering the supervisor's directory as that user), and
//   - when the command exits, reports its status and the processes it left
//     running, then lets those run until TIMEOUT has passed since the start;
//   - at TIMEOUT, on SIGTERM (the call was cancelled) or on SIGUSR1 (the
//     agent's pid guard: the sandbox is running out of processes), kills
//     every process below it, repeatedly, until none is left;
//   - exits once nothing is left below it.
//
// Its reports are lines on fd 3 (see the ev* constants). It is meant to be
// run by the agent only; its stdio belongs to the command.
func RunContain(args []string) int {
	syscall.CloseOnExec(containFD)
	var cred *syscall.Credential
	if len(args) > 0 && strings.HasPrefix(args[0], containAs) {
		c, err := parseCredArg(strings.TrimPrefix(args[0], containAs))
		if err != nil {
			fmt.Fprintf(os.Stderr, "sandbox-agent contain: %v\n", err)
			return 2
		}
		cred, args = c, args[1:]
	}
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintf(os.Stderr, "sandbox-agent contain: usage: contain TIMEOUT PATH -- ARGV... (it is run by the agent daemon, not by hand)\n")
		return 2
	}
	timeout, err := time.ParseDuration(args[0])
	if err != nil || timeout <= 0 {
		fmt.Fprintf(os.Stderr, "sandbox-agent contain: timeout %q is not a positive duration\n", args[0])
		return 2
	}
	// A small, quiet runtime: one P, and a collection only when the heap
	// nears a small cap (the supervisor allocates little but for kill
	// passes), so the runtime rarely has work beside the supervisor's own.
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(supervisorHeap)
	s := &supervisor{self: os.Getpid(), deadline: time.Now().Add(timeout), cred: cred}
	return s.run(args[1], args[3:])
}

// Status lines, supervisor to agent.
const (
	evStarted  = "started"  // started PID
	evStartErr = "starterr" // starterr ERRNO: the command could not start
	evExit     = "exit"     // exit WAITSTATUS LEFT PID...: the command ended, LEFT processes it started still run
	evKilled   = "killed"   // killed REASON KILLED REMAINING
	evGone     = "gone"     // every process the command left has ended
)

// Reasons for a kill.
const (
	killTimeout = "timeout"
	killCancel  = "cancel"
	killPids    = "pids"
)

type supervisor struct {
	self     int
	deadline time.Time
	cred     *syscall.Credential // the command's; nil: the supervisor's own

	leader     int
	leaderDone bool
	leaderWS   syscall.WaitStatus
	noChildren bool
	left       int  // processes running when the leader exited
	killed     bool // a kill has run
}

func (s *supervisor) report(fields ...string) {
	// The agent may be gone (restarted on the host backend); the
	// supervisor carries on regardless, so errors are dropped.
	_ = rawWrite(containFD, []byte(strings.Join(fields, " ")+"\n"))
}

func (s *supervisor) run(path string, argv []string) int {
	// Caught signals are reset to their default in the command; ignored ones
	// would be inherited, so the agent's ignored SIGHUP and SIGPIPE are
	// caught here and the command gets the defaults a shell expects.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGPIPE)
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 && errno != syscall.EINVAL {
		// Without it the command is still killed with its group at the
		// deadline, but escaped descendants go to the agent. EINVAL is
		// gVisor's answer to every process but init (the agent's init
		// then reaps them): said once in the agent's log, not in every
		// command's output.
		fmt.Fprintf(os.Stderr, "sandbox-agent contain: cannot become a child subreaper: %v\n", errno)
	}
	reserveThreads(supervisorThreads)

	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: s.cred},
	}
	if s.cred != nil {
		// The command enters its directory once it is the account, as an
		// unsupervised one does: a directory the account may not enter
		// fails its start instead of leaving it there.
		if wd, err := syscall.Getwd(); err == nil {
			attr.Dir = wd
		}
	}
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		errno, _ := err.(syscall.Errno)
		s.report(evStartErr, strconv.Itoa(int(errno)))
		return 1
	}
	s.leader = pid
	s.report(evStarted, strconv.Itoa(pid))
	// The command's stdio is the agent's pipes: drop the supervisor's
	// copies, so the agent sees EOF when the command's processes close theirs.
	// Its own stderr (a Go runtime failure included) goes to the status
	// pipe, where the agent logs what it does not understand.
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR, 0); err == nil {
		_ = syscall.Dup3(null, 0, 0)
		_ = syscall.Dup3(null, 1, 0)
		syscall.Close(null)
	}
	_ = syscall.Dup3(containFD, 2, 0)

	timer := time.NewTimer(time.Until(s.deadline))
	defer timer.Stop()
	// The tick covers SIGCHLDs coalesced while a pass ran.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	reported := false
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				s.kill(killCancel)
			case syscall.SIGUSR1:
				s.kill(killPids)
			}
		case <-timer.C:
			s.kill(killTimeout)
		case <-tick.C:
			if s.killed && !s.noChildren {
				// A kill ran out of its bounds: keep at it.
				killTree(s.self, s.reap)
			}
		}
		s.reap()
		if s.leaderDone && !reported {
			reported = true
			s.reportExit()
		}
		if reported && s.noChildren {
			if s.left > 0 && !s.killed {
				s.report(evGone)
			}
			return 0
		}
	}
}

// reap collects every child that has ended; noChildren tells whether any is
// left at all (as a subreaper, none means nothing is left below).
func (s *supervisor) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, errno := rawWait4(-1, &ws, syscall.WNOHANG)
		if errno == syscall.EINTR {
			continue
		}
		if errno == syscall.ECHILD {
			s.noChildren = true
			return true
		}
		if errno != 0 || pid <= 0 {
			return false
		}
		if pid == s.leader {
			s.leaderDone, s.leaderWS = true, ws
		}
	}
}

func (s *supervisor) reportExit() {
	fields := []string{evExit, strconv.Itoa(int(s.leaderWS))}
	if s.noChildren {
		s.report(append(fields, "0")...)
		return
	}
	live, _ := descendants(procSnapshot(), s.self)
	s.left = len(live)
	fields = append(fields, strconv.Itoa(len(live)))
	for _, p := range live[:min(len(live), maxNamedLeft)] {
		fields = append(fields, strconv.Itoa(p))
	}
	s.report(fields...)
}

func (s *supervisor) kill(reason string) {
	if s.noChildren && s.leaderDone {
		return
	}
	s.killed = true
	killed, remaining := killTree(s.self, s.reap)
	s.report(evKilled, reason, strconv.Itoa(killed), strconv.Itoa(remaining))
}
