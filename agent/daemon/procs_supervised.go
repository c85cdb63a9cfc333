package daemon

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// supervisedGrace is how long past its timeout the agent lets a supervisor
// take to report before it kills the supervisor and the command's group
// itself (a supervisor that was stopped or killed by the command).
const supervisedGrace = 10 * time.Second

// maxStatusLine caps a supervisor's status line.
const maxStatusLine = 4 << 10

// runningExec is an exec request whose processes may still run, keyed in
// processService.execs by pid.
type runningExec struct {
	// supervised: the pid is a supervisor (RunContain), which kills its
	// whole tree on SIGTERM; otherwise it is the command's process group.
	supervised bool
}

// kill ends everything the exec started, as far as it can.
func (e runningExec) kill(pid int) {
	if e.supervised {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		return
	}
	killGroup(pid)
}

// callEvent is one status line of a supervisor.
type callEvent struct {
	kind   string
	fields []string
}

func (e callEvent) text() string { return strings.Join(append([]string{e.kind}, e.fields...), " ") }

func (e callEvent) int(i int) int {
	if i >= len(e.fields) {
		return 0
	}
	n, _ := strconv.Atoi(e.fields[i])
	return n
}

// supervised wraps cmd in the agent's contain command: the returned command
// runs `self contain [--as=CRED] TIMEOUT PATH -- ARGV...` with cmd's
// directory, environment and stdio, and its status pipe's read end. The
// supervisor itself runs as the agent's user, so that it can kill what the
// command starts whatever that does; it gives the command cmd's credential
// (--as). The caller starts it and closes statusW once it has started.
func supervised(self string, cmd *exec.Cmd, timeout time.Duration) (sup *exec.Cmd, statusR, statusW *os.File, err error) {
	statusR, statusW, err = os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	args := []string{ContainCommand}
	if a := cmd.SysProcAttr; a != nil && a.Credential != nil {
		args = append(args, containAs+credArg(a.Credential))
	}
	args = append(append(args, timeout.String(), cmd.Path, "--"), cmd.Args...)
	sup = exec.Command(self, args...)
	sup.Dir, sup.Env = cmd.Dir, cmd.Env
	sup.Stdin, sup.Stdout, sup.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	sup.ExtraFiles = []*os.File{statusW} // fd 3, containFD
	// Its own group: a command that signals its own group (kill 0) does not
	// reach its supervisor.
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return sup, statusR, statusW, nil
}

// readEvents forwards a supervisor's status lines to the returned channel,
// closed at EOF (the supervisor exited). Whoever reads must read it to its
// end, or the supervisor blocks on a full pipe.
func readEvents(r *os.File) <-chan callEvent {
	ch := make(chan callEvent, 8)
	go func() {
		defer close(ch)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 256), maxStatusLine)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 {
				ch <- callEvent{kind: f[0], fields: f[1:]}
			}
		}
	}()
	return ch
}

// WithSupervisedExec runs every exec command under the agent's contain
// command (RunContain), so that its deadline kills everything it started,
// and keeps the sandbox's pid reserve. The executable WithSelf names must be
// a sandbox-agent. WithSubreaper implies it.
func WithSupervisedExec() Option { return func(o *options) { o.supervise = true } }

// agentThreads is the agent's thread reserve (see reserveThreads): enough
// for the goroutines that may block in system calls at once while a fork
// bomb holds every pid, mainly the guard, a handler per exec and reaping.
const agentThreads = 8

// supervisors lists the pids of the running supervisors.
func (ps *processService) supervisors() []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var pids []int
	for pid, e := range ps.execs {
		if e.supervised {
			pids = append(pids, pid)
		}
	}
	return pids
}

// startSupervised starts cmd below a supervisor; run waits for the
// command's exit as the supervisor reports it and for its output, and a
// goroutine then follows the supervisor until everything below it has ended.
func (ps *processService) startSupervised(cmd *exec.Cmd, as *account, p *execPipes, timeout time.Duration, clientGone context.Context) (func() (*proto.ExecResponse, error), error) {
	sup, statusR, statusW, err := supervised(ps.self, cmd, timeout)
	if err != nil {
		p.closeAll()
		return nil, errdefs.Internal("cannot make a pipe: %v", err)
	}
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		p.closeAll()
		closeAll(statusR, statusW)
		return nil, errShuttingDown
	}
	started := time.Now()
	exited, err := ps.reaper.start(sup)
	p.closeChildEnds()
	statusW.Close()
	if err != nil {
		ps.mu.Unlock()
		p.closeAll()
		statusR.Close()
		return nil, err
	}
	c := &supervisedCall{
		ps: ps, sup: sup, pid: sup.Process.Pid, argv0: cmd.Args[0], as: as, started: started, timeout: timeout,
		events: readEvents(statusR), exited: exited,
	}
	ps.execs[c.pid] = runningExec{supervised: true}
	ps.mu.Unlock()
	return func() (*proto.ExecResponse, error) {
		resp, err := c.wait(clientGone)
		p.finish(resp)
		if err == nil {
			c.late(resp)
		}
		go c.follow()
		return resp, err
	}, nil
}

// supervisedCall is one exec under its supervisor, from the agent's side.
type supervisedCall struct {
	ps      *processService
	sup     *exec.Cmd
	pid     int // the supervisor's
	argv0   string
	as      *account // the command's account; nil: the agent's user
	started time.Time
	timeout time.Duration
	events  <-chan callEvent // closed when the supervisor has exited
	exited  <-chan exitStatus
	supDone bool // exited has delivered
	leader  int  // the command's pid (and process group)
}

// wait follows the supervisor's reports until the command has exited.
func (c *supervisedCall) wait(clientGone context.Context) (*proto.ExecResponse, error) {
	backup := time.NewTimer(c.timeout + supervisedGrace)
	defer backup.Stop()
	gone := clientGone.Done()
	resp := &proto.ExecResponse{}
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				// The supervisor ended without telling how the command did:
				// it was killed. Its tree went to the agent; the command's
				// group is what can still be found of it.
				killGroup(c.leader)
				if !c.supDone {
					<-c.exited
					c.supDone = true
				}
				if resp.TimedOut {
					resp.ExitCode, resp.Signal = 128+9, "KILL"
					resp.Duration = time.Since(c.started)
					return resp, nil
				}
				return nil, errdefs.Internal("the agent's supervisor of %q was killed before the command ended; the command's process group was killed too", c.argv0)
			}
			if done, err := c.apply(resp, ev); done || err != nil {
				return resp, err
			}
		case es := <-c.exited:
			c.exited, c.supDone = nil, true
			_ = es // the events that are left say what happened
		case <-gone:
			gone = nil
			_ = syscall.Kill(c.pid, syscall.SIGTERM)
		case <-backup.C:
			c.ps.log.Warn("a command's supervisor did not report in time; killing it and the command's group", "argv0", c.argv0, "supervisor", c.pid)
			resp.TimedOut = true
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
			killGroup(c.leader)
		}
	}
}

// apply takes one report into resp; done is set once the command exited.
func (c *supervisedCall) apply(resp *proto.ExecResponse, ev callEvent) (done bool, err error) {
	switch ev.kind {
	case evStarted:
		c.leader = ev.int(0)
	case evStartErr:
		return true, startErrorAs(c.argv0, c.as, syscall.Errno(ev.int(0)))
	case evKilled:
		resp.Killed += ev.int(1)
		switch ev.fields[0] {
		case killTimeout:
			resp.TimedOut = true
		case killPids:
			resp.OutOfPids = true
			if c.ps.guard != nil {
				if u, ok := c.ps.guard.killedAt(c.pid); ok {
					resp.PidsInUse, resp.PidsLimit, resp.PidsReserve = u.inUse, u.limit, u.reserve
				}
			}
		}
		if n := ev.int(2); n > 0 {
			c.ps.log.Warn("processes of a command survived being killed", "argv0", c.argv0, "remaining", n)
		}
	case evGone:
	case evExit:
		resp.Duration = time.Since(c.started)
		resp.ExitCode, resp.Signal = exitFields(syscall.WaitStatus(ev.int(0)))
		if left := ev.int(1); left > 0 {
			resp.Left, resp.LeftUntil = left, c.started.Add(c.timeout)
			for i := 2; i < len(ev.fields); i++ {
				resp.LeftPIDs = append(resp.LeftPIDs, ev.int(i))
			}
		}
		return true, nil
	default:
		c.ps.log.Warn("the supervisor of a command says", "argv0", c.argv0, "line", ev.text())
	}
	return false, nil
}

// late takes into resp a kill for the pid reserve of what the command left
// running, when the guard picked this call before the response went out:
// the response then says why the background processes are gone.
func (c *supervisedCall) late(resp *proto.ExecResponse) {
	if c.ps.guard == nil || resp.OutOfPids || !c.ps.guard.picked(c.pid) {
		return
	}
	timer := time.NewTimer(killBudget + time.Second)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.events = nil
				return
			}
			c.apply(resp, ev)
			if ev.kind == evKilled {
				return
			}
		case <-timer.C:
			return
		}
	}
}

// follow reads the supervisor's last reports (kills of what the command
// left) into the log and forgets the exec once the supervisor has exited.
func (c *supervisedCall) follow() {
	for c.events != nil {
		ev, ok := <-c.events
		if !ok {
			break
		}
		switch ev.kind {
		case evKilled:
			c.ps.log.Info("killed the processes a command left running", "argv0", c.argv0, "reason", ev.fields[0], "killed", ev.int(1))
		case evGone:
		default:
			c.ps.log.Warn("the supervisor of a command says", "argv0", c.argv0, "line", ev.text())
		}
	}
	if !c.supDone {
		<-c.exited
	}
	if c.ps.guard != nil {
		c.ps.guard.killedAt(c.pid)
	}
	c.ps.mu.Lock()
	delete(c.ps.execs, c.pid)
	c.ps.mu.Unlock()
	c.sup.Process.Release()
}
