package daemon

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

const (
	// followFrame caps the output in one follow frame: what a follower
	// costs the agent beyond its goroutine.
	followFrame = 256 << 10
	// followWrite bounds writing one follow frame: a follower that takes
	// nothing for this long is ended (it resumes from its cursor).
	followWrite = 2 * time.Minute
)

// The long-lived processes' ops (proto.OpProcStart and the other proc_
// ops), served by the processes service from its longTable.
func (ps *processService) registerLong(t opTable) {
	addBody(t, proto.OpProcStart, func(r *proto.Request) *proto.ProcStartRequest { return r.ProcStart }, ps.procStart)
	addBody(t, proto.OpProcGet, func(r *proto.Request) *proto.ProcGetRequest { return r.ProcGet }, ps.procGet)
	addBody(t, proto.OpProcList, func(r *proto.Request) *proto.ProcListRequest { return r.ProcList }, ps.procList)
	addBody(t, proto.OpProcOutput, func(r *proto.Request) *proto.ProcOutputRequest { return r.ProcOutput }, ps.procOutput)
	addBody(t, proto.OpProcFollow, func(r *proto.Request) *proto.ProcFollowRequest { return r.ProcFollow }, ps.procFollow)
	addBody(t, proto.OpProcInput, func(r *proto.Request) *proto.ProcInputRequest { return r.ProcInput }, ps.procInput)
	addBody(t, proto.OpProcResize, func(r *proto.Request) *proto.ProcResizeRequest { return r.ProcResize }, ps.procResize)
	addBody(t, proto.OpProcSignal, func(r *proto.Request) *proto.ProcSignalRequest { return r.ProcSignal }, ps.procSignal)
	addBody(t, proto.OpProcKill, func(r *proto.Request) *proto.ProcKillRequest { return r.ProcKill }, ps.procKill)
}

func (ps *processService) procStart(_ context.Context, _ *request, r *proto.ProcStartRequest) (*proto.Response, func(), error) {
	if ps.isClosed() {
		return nil, nil, errShuttingDown
	}
	base, err := ps.env.forCommand()
	if err != nil {
		return nil, nil, err
	}
	if ps.guard != nil && len(r.Argv) > 0 {
		if u, err := ps.guard.makeRoom(roomWait, ps.supervisors); err == nil && u.low() {
			return nil, nil, errdefs.ResourceExhausted("the sandbox has %d of its %d processes in use and the agent keeps %d free for itself, so %q was not started; "+
				"stop processes it no longer needs or give the sandbox a larger pids limit", u.inUse, u.limit, u.reserve, r.Argv[0])
		}
	}
	info, err := ps.long.start(r, base)
	if err != nil {
		return nil, nil, err
	}
	return &proto.Response{Proc: &info}, nil, nil
}

func (ps *processService) procGet(ctx context.Context, rq *request, r *proto.ProcGetRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if r.Wait > 0 {
		timer := time.NewTimer(min(r.Wait, maxWait))
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
		case <-watchClosed(ctx, rq.st).Done():
		}
	}
	info := p.snapshot()
	return &proto.Response{Proc: &info}, nil, nil
}

func (ps *processService) procList(_ context.Context, _ *request, r *proto.ProcListRequest) (*proto.Response, func(), error) {
	return &proto.Response{ProcList: &proto.ProcListResponse{Processes: ps.long.list(r.Labels)}}, nil, nil
}

// checkSince refuses a cursor past the output's end: bytes that were never
// written cannot be read from.
func checkSince(p *longProc, since int64) error {
	_, end, _ := p.ring.bounds()
	if since < 0 || since > end {
		return errdefs.InvalidArgument("since is %d but process %s has written %d bytes; give a cursor from 0 to %d (the next of an earlier read)", since, p.info.ID, end, end)
	}
	return nil
}

func (ps *processService) procOutput(_ context.Context, _ *request, r *proto.ProcOutputRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSince(p, r.Since); err != nil {
		return nil, nil, err
	}
	n := r.MaxBytes
	switch {
	case n == 0:
		n = proto.DefaultProcRead
	case n < 0 || n > proto.MaxProcRead:
		return nil, nil, errdefs.InvalidArgument("max_bytes is %d; give 0 for the default of %d, or up to %d", n, proto.DefaultProcRead, proto.MaxProcRead)
	}
	rd := p.ring.read(r.Since, n)
	out := &proto.ProcOutputResponse{Chunks: rd.chunks, Next: rd.next, Dropped: rd.dropped, Process: p.snapshot()}
	if out.Chunks == nil {
		out.Chunks = []proto.ProcChunk{}
	}
	return &proto.Response{ProcOutput: out}, nil, nil
}

// procFollow answers with the process as it is, then hands the stream to
// a writer of its output frames. The client sends nothing after its
// request, so a read that returns means it left: that ends the follow.
func (ps *processService) procFollow(ctx context.Context, rq *request, r *proto.ProcFollowRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSince(p, r.Since); err != nil {
		return nil, nil, err
	}
	info := p.snapshot()
	st := rq.st
	run := func() {
		defer st.Close()
		follow(watchClosed(ctx, st), st, p, r.Since)
	}
	return &proto.Response{Proc: &info}, run, nil
}

// follow writes p's output from cursor as frames, then the exit frame once
// p has ended and every byte was written, until gone ends or a write fails.
func follow(gone context.Context, st *yamux.Stream, p *longProc, cursor int64) {
	write := func(f *proto.ProcFrame) bool {
		st.SetWriteDeadline(time.Now().Add(followWrite))
		return proto.WriteFrame(st, f) == nil
	}
	for {
		// The end is read before the ring, so output that came after
		// the process ended cannot slip between the two.
		ended := p.ended()
		rd := p.ring.read(cursor, followFrame)
		if len(rd.chunks) > 0 || rd.dropped > 0 {
			if !write(&proto.ProcFrame{Chunks: rd.chunks, Dropped: rd.dropped, Next: rd.next}) {
				return
			}
			cursor = rd.next
			continue
		}
		if ended && rd.closed {
			info := p.snapshot()
			write(&proto.ProcFrame{Next: cursor, Exit: &info})
			return
		}
		select {
		case <-rd.wake:
		case <-p.done:
		case <-gone.Done():
			return
		}
	}
}

func (ps *processService) procInput(_ context.Context, _ *request, r *proto.ProcInputRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Data) > proto.MaxProcInput {
		return nil, nil, errdefs.InvalidArgument("the input is %d bytes; send at most %d per request", len(r.Data), proto.MaxProcInput)
	}
	return &proto.Response{}, nil, p.input(r.Data, r.EOF)
}

// input writes data to the process's stdin or terminal within inputWait,
// then with eof closes its stdin.
func (p *longProc) input(data []byte, eof bool) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.hibernated {
		return errStoppedByHibernation(p.info.ID)
	}
	if p.inClosed {
		return errdefs.FailedPrecondition("process %s has ended; it takes no more input", p.info.ID)
	}
	w := p.master
	if w == nil {
		w = p.stdin
	}
	if eof && p.master != nil {
		return errdefs.InvalidArgument("process %s has a terminal, which has no end of input; send \"\\x04\" (Ctrl-D) as data, as a user would", p.info.ID)
	}
	if w == nil {
		return errdefs.FailedPrecondition("the stdin of process %s was closed (eof was sent); it takes no more input", p.info.ID)
	}
	if len(data) > 0 {
		w.SetWriteDeadline(time.Now().Add(inputWait))
		n, err := w.Write(data)
		w.SetWriteDeadline(time.Time{})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errdefs.DeadlineExceeded("process %s did not read its input within %s; %d of %d bytes were written", p.info.ID, inputWait, n, len(data))
		case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EIO):
			return errdefs.FailedPrecondition("process %s no longer reads its input (it closed it); %d of %d bytes were written", p.info.ID, n, len(data))
		case err != nil:
			return errdefs.Internal("writing the input of process %s failed after %d of %d bytes: %v", p.info.ID, n, len(data), err)
		}
	}
	if eof {
		p.stdin.Close()
		p.stdin = nil
	}
	return nil
}

func (ps *processService) procResize(_ context.Context, _ *request, r *proto.ProcResizeRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if p.hibernated {
		return nil, nil, errStoppedByHibernation(p.info.ID)
	}
	if p.master == nil {
		return nil, nil, errdefs.FailedPrecondition("process %s has no terminal to resize; start it with pty set", r.ID)
	}
	if err := checkPtySize(r.Rows, r.Cols); err != nil {
		return nil, nil, err
	}
	// inMu keeps the master open while it is resized.
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.inClosed {
		return nil, nil, errdefs.FailedPrecondition("process %s has ended; its terminal is gone", r.ID)
	}
	size := proto.PtySize{Rows: r.Rows, Cols: r.Cols}
	if err := setPtySize(p.master, size); err != nil {
		return nil, nil, errdefs.Internal("resizing the terminal of process %s failed: %v", r.ID, err)
	}
	p.mu.Lock()
	p.size = size
	p.mu.Unlock()
	return &proto.Response{}, nil, nil
}

// procSignal signals the process group. Once the process has ended, the
// group is signalled only while live members remain (its pid, still the
// group's, cannot have been given to another process then).
func (ps *processService) procSignal(_ context.Context, _ *request, r *proto.ProcSignalRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	sig, err := parseSignal(r.Signal)
	if err != nil {
		return nil, nil, err
	}
	if p.hibernated {
		return nil, nil, errStoppedByHibernation(p.info.ID)
	}
	if p.ended() && (pidExists(p.info.PID) || !groupLives(p.info.PID)) {
		return nil, nil, errdefs.FailedPrecondition("process %s and its group have ended", r.ID)
	}
	if err := syscall.Kill(-p.info.PID, sig); err != nil {
		if err == syscall.ESRCH {
			return nil, nil, errdefs.FailedPrecondition("process %s and its group have ended", r.ID)
		}
		return nil, nil, errdefs.Internal("sending %s to the group of process %s failed: %v", r.Signal, r.ID, err)
	}
	return &proto.Response{}, nil, nil
}

func (ps *processService) procKill(_ context.Context, _ *request, r *proto.ProcKillRequest) (*proto.Response, func(), error) {
	p, err := ps.long.get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := p.kill(killWait); err != nil {
		return nil, nil, err
	}
	info := p.snapshot()
	return &proto.Response{Proc: &info}, nil, nil
}

// groupLives reports whether process group pgid has a member that is not
// a zombie.
func groupLives(pgid int) bool {
	for _, e := range procSnapshot() {
		if e.pgid == pgid && !e.zombie {
			return true
		}
	}
	return false
}
