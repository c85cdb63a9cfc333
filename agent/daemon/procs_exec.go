package daemon

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	defaultExecTimeout = 10 * time.Minute
	maxExecTimeout     = 24 * time.Hour
	defaultExecOutput  = 64 << 10
	maxExecOutput      = 8 << 20
	// outputGrace is how long output may still arrive after the command
	// exited (from children it left behind) before the pipes are closed.
	outputGrace = 2 * time.Second
	// roomWait bounds how long an exec waits for the pid guard to free the
	// sandbox's reserve before it is refused.
	roomWait = 3 * time.Second
)

// exec runs a command to completion. Supervised (the sandbox's agent), the
// command runs below a supervisor that kills everything it started at the
// timeout or when the client closes the stream, and what it leaves running
// at a normal exit at the timeout; see RunContain. Otherwise its process
// group is killed at the timeout or when the client goes, and children it
// leaves running after a normal exit keep running.
func (ps *processService) exec(ctx context.Context, st *yamux.Stream, r *proto.ExecRequest) (*proto.ExecResponse, error) {
	base, err := ps.env.forCommand()
	if err != nil {
		return nil, err
	}
	as, err := lookupAccount(r.User)
	if err != nil {
		return nil, err
	}
	cmd, err := buildCmdAs(r.Argv, r.Dir, base, r.Env, as)
	if err != nil {
		return nil, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = defaultExecTimeout
	}
	timeout = min(timeout, maxExecTimeout)
	max := r.MaxBytes
	if max <= 0 {
		max = defaultExecOutput
	}
	max = min(max, maxExecOutput)
	if ps.guard != nil {
		if u, err := ps.guard.makeRoom(roomWait, ps.supervisors); err == nil && u.low() {
			return nil, errdefs.ResourceExhausted("the sandbox has %d of its %d processes in use and the agent keeps %d free for itself, so %q was not started; "+
				"stop processes it no longer needs or give the sandbox a larger pids limit", u.inUse, u.limit, u.reserve, r.Argv[0])
		}
	}

	p, err := newExecPipes(cmd, len(r.Stdin) > 0)
	if err != nil {
		return nil, err
	}
	var live *liveOutput
	if r.Stream {
		// Closed before exec returns, so its frames precede the response.
		live = newLiveOutput(st, max)
		defer live.close()
	}
	clientGone := watchClosed(ctx, st)
	var run func() (*proto.ExecResponse, error)
	if ps.supervise {
		run, err = ps.startSupervised(cmd, as, p, timeout, clientGone)
	} else {
		run, err = ps.startGroup(cmd, p, timeout, clientGone)
	}
	if err == errShuttingDown {
		return nil, err
	}
	if err != nil {
		return nil, startErrorAs(r.Argv[0], as, err)
	}
	p.collect(max, r.Stdin, live)
	resp, err := run()
	if err != nil {
		return nil, err
	}
	if clientGone.Err() != nil && ctx.Err() == nil && !resp.TimedOut {
		// Nobody is left to read the response; say so in the log only.
		ps.log.Info("killed a command whose client went away", "argv0", r.Argv[0])
	}
	return resp, nil
}

// startGroup starts cmd in its own process group; run waits for it and its
// output, and kills the group at the timeout or when the client goes.
func (ps *processService) startGroup(cmd *exec.Cmd, p *execPipes, timeout time.Duration, clientGone context.Context) (func() (*proto.ExecResponse, error), error) {
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		p.closeAll()
		return nil, errShuttingDown
	}
	started := time.Now()
	exited, err := ps.reaper.start(cmd)
	p.closeChildEnds()
	if err != nil {
		ps.mu.Unlock()
		p.closeAll()
		return nil, err
	}
	pgid := cmd.Process.Pid
	ps.execs[pgid] = runningExec{}
	ps.mu.Unlock()

	return func() (*proto.ExecResponse, error) {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		resp := &proto.ExecResponse{}
		var es exitStatus
		select {
		case es = <-exited:
		case <-timer.C:
			resp.TimedOut = true
			killGroup(pgid)
			es = <-exited
		case <-clientGone.Done():
			killGroup(pgid)
			es = <-exited
		}
		resp.Duration = es.at.Sub(started)
		resp.ExitCode, resp.Signal = exitFields(es.ws)
		ps.mu.Lock()
		delete(ps.execs, pgid)
		ps.mu.Unlock()
		cmd.Process.Release()
		p.finish(resp)
		return resp, nil
	}, nil
}

// execPipes are an exec's stdio pipes and the copies that read them.
type execPipes struct {
	outR, outW, errR, errW, inR, inW *os.File
	stdout, stderr                   *headTail
	readers                          sync.WaitGroup
}

func newExecPipes(cmd *exec.Cmd, stdin bool) (*execPipes, error) {
	p := &execPipes{}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, errdefs.Internal("cannot make a pipe: %v", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, errdefs.Internal("cannot make a pipe: %v", err)
	}
	if stdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			p.closeAll()
			return nil, errdefs.Internal("cannot make a pipe: %v", err)
		}
		cmd.Stdin = p.inR
	}
	cmd.Stdout, cmd.Stderr = p.outW, p.errW
	return p, nil
}

// closeChildEnds closes the ends the started process holds its own copies of.
func (p *execPipes) closeChildEnds() { closeAll(p.outW, p.errW, p.inR) }

func (p *execPipes) closeAll() { closeAll(p.outR, p.outW, p.errR, p.errW, p.inR, p.inW) }

// collect starts copying the output (max bytes per stream, head and tail;
// live, when not nil, gets a copy as it comes) and writing stdin.
func (p *execPipes) collect(max int, stdin []byte, live *liveOutput) {
	p.stdout, p.stderr = newHeadTail(max), newHeadTail(max)
	p.readers.Add(2)
	go func() { defer p.readers.Done(); io.Copy(live.tee("stdout", p.stdout), p.outR) }()
	go func() { defer p.readers.Done(); io.Copy(live.tee("stderr", p.stderr), p.errR) }()
	if p.inW != nil {
		go func() { p.inW.Write(stdin); p.inW.Close() }()
	}
}

// finish waits for the output, at most outputGrace once the command has
// exited (processes it left may hold the pipes), and puts it in resp.
func (p *execPipes) finish(resp *proto.ExecResponse) {
	readersDone := make(chan struct{})
	go func() { p.readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(outputGrace):
		closeAll(p.outR, p.errR) // unblocks the copies
		<-readersDone
	}
	closeAll(p.outR, p.errR, p.inW)
	if resp != nil {
		resp.Stdout, resp.StdoutOmitted = p.stdout.bytes()
		resp.Stderr, resp.StderrOmitted = p.stderr.bytes()
	}
}

var errShuttingDown = errdefs.Unavailable("the agent daemon is shutting down; reconnect and retry")

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
