package daemon

import (
	"context"
	"io"
	"os"
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
)

// exec runs a command to completion. Its process group is killed when the
// timeout passes or the client closes the stream; children it leaves
// running after a normal exit keep running (the subreaper reaps them).
func (s *Server) exec(ctx context.Context, st *yamux.Stream, r *proto.ExecRequest) (*proto.ExecResponse, error) {
	cmd, err := buildCmd(r.Argv, r.Dir, r.Env)
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

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, errdefs.Internal("cannot make a pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, errdefs.Internal("cannot make a pipe: %v", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if len(r.Stdin) > 0 {
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, errdefs.Internal("cannot make a pipe: %v", err)
		}
		cmd.Stdin = inR
	}
	clientGone := watchClosed(ctx, st)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeAll(outR, outW, errR, errW, inR, inW)
		return nil, errdefs.Unavailable("the agent daemon is shutting down; reconnect and retry")
	}
	started := time.Now()
	exited, err := s.reaper.start(cmd)
	closeAll(outW, errW, inR)
	if err != nil {
		s.mu.Unlock()
		closeAll(outR, errR, inW)
		return nil, startError(r.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	s.execs[pgid] = struct{}{}
	s.mu.Unlock()

	stdout, stderr := newHeadTail(max), newHeadTail(max)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); io.Copy(stdout, outR) }()
	go func() { defer readers.Done(); io.Copy(stderr, errR) }()
	if inW != nil {
		go func() { inW.Write(r.Stdin); inW.Close() }()
	}

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
	s.mu.Lock()
	delete(s.execs, pgid)
	s.mu.Unlock()
	cmd.Process.Release()

	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(outputGrace):
		closeAll(outR, errR) // unblocks the copies
		<-readersDone
	}
	closeAll(outR, errR, inW)

	resp.ExitCode, resp.Signal = exitFields(es.ws)
	resp.Stdout, resp.StdoutOmitted = stdout.bytes()
	resp.Stderr, resp.StderrOmitted = stderr.bytes()
	if clientGone.Err() != nil && ctx.Err() == nil && !resp.TimedOut {
		// Nobody is left to read the answer; say so in the log only.
		s.log.Info("killed a command whose client went away", "argv0", r.Argv[0], "pid", pgid)
	}
	return resp, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
