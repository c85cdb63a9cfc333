package agent

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// The long-lived processes (proto.OpProcStart and the other proc_ ops; see
// agent/proto/procs.go): processes the agent daemon owns and keeps the
// output of, whatever happens to this session. Every method fails with
// errdefs.ErrFailedPrecondition on a daemon that predates them; a process
// id that is not known is errdefs.ErrNotFound, a bad argument
// errdefs.ErrInvalidArgument, the limit of processes
// errdefs.ErrResourceExhausted, each with a sentence saying what to do.

// needProcs refuses the proc_ ops to a daemon that does not take them.
func (c *Client) needProcs() error {
	if c.hello != nil && !c.hello.Processes {
		return errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates long-lived processes; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	return nil
}

// procCall runs one proc_ request/response exchange.
func (c *Client) procCall(ctx context.Context, req *proto.Request) (*proto.Response, error) {
	if err := c.needProcs(); err != nil {
		return nil, err
	}
	return c.call(ctx, req)
}

// ProcStart starts a process the agent keeps (proto.ProcStartRequest) and
// returns it, running, with its id ("p1", ...).
func (c *Client) ProcStart(ctx context.Context, r *proto.ProcStartRequest) (*proto.ProcInfo, error) {
	if err := c.needAccounts(r.User); err != nil {
		return nil, err
	}
	resp, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcStart, ProcStart: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Proc, proto.OpProcStart)
}

// ProcGet describes process id; with wait > 0 it first waits up to wait
// for the process to end (it is returned running if it has not).
func (c *Client) ProcGet(ctx context.Context, id string, wait time.Duration) (*proto.ProcInfo, error) {
	resp, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcGet, ProcGet: &proto.ProcGetRequest{ID: id, Wait: wait}})
	if err != nil {
		return nil, err
	}
	return need(resp.Proc, proto.OpProcGet)
}

// ProcList lists the processes, running and recently ended, oldest first;
// with labels, only those whose labels include all of them.
func (c *Client) ProcList(ctx context.Context, labels map[string]string) ([]proto.ProcInfo, error) {
	resp, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcList, ProcList: &proto.ProcListRequest{Labels: labels}})
	if err != nil {
		return nil, err
	}
	l, err := need(resp.ProcList, proto.OpProcList)
	if err != nil {
		return nil, err
	}
	return l.Processes, nil
}

// Activity tells when a long-lived process of the sandbox last wrote output
// and how many run (proto.Activity), for idle detection: a process
// printing output keeps its sandbox awake. It fails with
// errdefs.ErrFailedPrecondition on a daemon that predates it.
func (c *Client) Activity(ctx context.Context) (proto.Activity, error) {
	if c.hello != nil && !c.hello.Activity {
		return proto.Activity{}, errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates reporting its activity; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpActivity})
	if err != nil {
		return proto.Activity{}, err
	}
	a, err := need(resp.Activity, proto.OpActivity)
	if err != nil {
		return proto.Activity{}, err
	}
	return *a, nil
}

// ProcOutput reads a process's output from r.Since (see
// proto.ProcOutputResponse: resume from its Next).
func (c *Client) ProcOutput(ctx context.Context, r *proto.ProcOutputRequest) (*proto.ProcOutputResponse, error) {
	resp, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcOutput, ProcOutput: r})
	if err != nil {
		return nil, err
	}
	return need(resp.ProcOutput, proto.OpProcOutput)
}

// ProcInput writes data to a process's stdin, or to its terminal as typed
// keys; with eof it then closes the stdin (not for a terminal).
func (c *Client) ProcInput(ctx context.Context, id string, data []byte, eof bool) error {
	_, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcInput, ProcInput: &proto.ProcInputRequest{ID: id, Data: data, EOF: eof}})
	return err
}

// ProcResize sets the size of a process's terminal.
func (c *Client) ProcResize(ctx context.Context, id string, rows, cols uint16) error {
	_, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcResize, ProcResize: &proto.ProcResizeRequest{ID: id, Rows: rows, Cols: cols}})
	return err
}

// ProcSignal sends signal ("TERM", "INT", ...) to a process's group.
func (c *Client) ProcSignal(ctx context.Context, id, signal string) error {
	_, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcSignal, ProcSignal: &proto.ProcSignalRequest{ID: id, Signal: signal}})
	return err
}

// ProcKill kills a process and its descendants (proto.ProcKillRequest)
// and returns its final state.
func (c *Client) ProcKill(ctx context.Context, id string) (*proto.ProcInfo, error) {
	resp, err := c.procCall(ctx, &proto.Request{Op: proto.OpProcKill, ProcKill: &proto.ProcKillRequest{ID: id}})
	if err != nil {
		return nil, err
	}
	return need(resp.Proc, proto.OpProcKill)
}

// ProcFollower is one follow of a process's output (proto.OpProcFollow).
// Next is called from one goroutine; Close from any.
type ProcFollower struct {
	st     *yamux.Stream
	ctx    context.Context
	info   proto.ProcInfo
	stop   func() bool
	exited bool // the exit frame was read
}

// ProcFollow follows process id's output from the cursor since: the
// returned follower's Next gives the output frames as they come, then the
// frame with Exit, then io.EOF. ctx bounds the whole follow: when it ends,
// the stream is closed and Next fails with its error. Closing the follow
// never touches the process; a new follow from the last frame's Next
// resumes without a gap or a repeat.
func (c *Client) ProcFollow(ctx context.Context, id string, since int64) (*ProcFollower, error) {
	if err := c.needProcs(); err != nil {
		return nil, err
	}
	st, resp, err := c.open(ctx, &proto.Request{Op: proto.OpProcFollow, ProcFollow: &proto.ProcFollowRequest{ID: id, Since: since}})
	if err != nil {
		return nil, err
	}
	info, err := need(resp.Proc, proto.OpProcFollow)
	if err != nil {
		st.Close()
		return nil, err
	}
	f := &ProcFollower{st: st, ctx: ctx, info: *info}
	f.stop = context.AfterFunc(ctx, func() { st.Close() })
	return f, nil
}

// Info is the process as it was when the follow began.
func (f *ProcFollower) Info() proto.ProcInfo { return f.info }

// Next returns the next frame; io.EOF after the exit frame. Any other
// error means the follow ended early: follow again from the last Next.
func (f *ProcFollower) Next() (*proto.ProcFrame, error) {
	var fr proto.ProcFrame
	if err := proto.ReadFrame(f.st, &fr); err != nil {
		switch {
		case f.exited && errors.Is(err, io.EOF):
			return nil, io.EOF
		case f.ctx.Err() != nil:
			return nil, ctxError(f.ctx.Err(), proto.OpProcFollow, 0)
		case errors.Is(err, io.EOF) || errors.Is(err, yamux.ErrStreamClosed) || errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, yamux.ErrConnectionReset):
			return nil, errdefs.Unavailable("the follow of process %s ended before the process did (the session or the stream closed); follow again from the last cursor", f.info.ID)
		default:
			return nil, errdefs.Internal("reading the output of process %s failed: %v", f.info.ID, err)
		}
	}
	if fr.Exit != nil {
		f.exited = true
	}
	return &fr, nil
}

// Close ends the follow; the process is not touched.
func (f *ProcFollower) Close() error {
	f.stop()
	return f.st.Close()
}
