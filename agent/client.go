// Package agent is sandboxd's side of the sandbox-agent protocol (see
// agent/proto): a Client multiplexes requests as yamux streams over the one
// byte stream that an exec of `sandbox-agent attach` provides.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Client is one session to one agent daemon. It is safe for concurrent use.
//
// Goroutines: yamux's receive, send and keepalive loops for the session;
// each call runs on its caller's goroutine; per watched root one feed and
// per subscriber one delivery goroutine (watch.go), which end with the
// session; the accept loop of the streams the agent opens and one per such
// stream until its handler has it (incoming.go). Close (or the pipe dropping) ends the session and every open
// stream.
type Client struct {
	sess  *yamux.Session
	quick time.Duration        // own deadline of the quick operations (deadline.go)
	file  time.Duration        // own deadline of the file operations
	hello *proto.HelloResponse // the daemon's, from NewClient

	watchMu sync.Mutex       // guards feeds
	feeds   map[string]*feed // workspace watches by root (watch.go)

	idleMu sync.Mutex   // guards idle
	idle   []idleStream // streams kept for the next reusable call (reuse.go)

	in incoming // the handler of the streams the agent opens (incoming.go)

	// stallCheck, when set, is asked why a call gets no response (stall.go).
	stallCheck func(context.Context) error
	stallAfter time.Duration
	// endCheck, when set, is asked why the session ended under a call
	// (stall.go); closing says Close ended it, which needs no asking.
	endCheck func(context.Context) error
	closing  atomic.Bool
}

// NewClient starts a session over rwc (the attach exec's stdio) and checks
// the daemon's version with a hello. The client owns rwc.
func NewClient(ctx context.Context, rwc io.ReadWriteCloser, opts ...ClientOption) (*Client, error) {
	c, err := newSession(rwc)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(c)
	}
	h, err := c.Hello(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	if h.Version != proto.Version {
		c.Close()
		return nil, errdefs.FailedPrecondition("the sandbox agent speaks protocol version %d but sandboxd needs %d; restart the agent with the matching binary", h.Version, proto.Version)
	}
	c.hello = h
	return c, nil
}

func newSession(rwc io.ReadWriteCloser) (*Client, error) {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.MaxStreamWindowSize = 1 << 20
	cfg.StreamCloseTimeout = time.Minute
	sess, err := yamux.Client(proto.CoalesceWrites(rwc, proto.DefaultHold), cfg)
	if err != nil {
		rwc.Close()
		return nil, errdefs.Internal("cannot start the agent session: %v", err)
	}
	c := &Client{sess: sess, quick: defaultQuickTimeout, file: defaultFileTimeout}
	go c.acceptIncoming()
	return c, nil
}

// Hello returns the daemon's identity.
func (c *Client) Hello(ctx context.Context) (*proto.HelloResponse, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpHello})
	if err != nil {
		return nil, err
	}
	return need(resp.Hello, proto.OpHello)
}

// ReadFile reads one file inside r.Root.
func (c *Client) ReadFile(ctx context.Context, r *proto.ReadFileRequest) (*proto.ReadFileResponse, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpReadFile, ReadFile: r})
	if err != nil {
		return nil, err
	}
	return need(resp.ReadFile, proto.OpReadFile)
}

// ReadFiles reads many files in one round trip.
func (c *Client) ReadFiles(ctx context.Context, r *proto.ReadFilesRequest) (*proto.ReadFilesResponse, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpReadFiles, ReadFiles: r})
	if err != nil {
		return nil, err
	}
	return need(resp.ReadFiles, proto.OpReadFiles)
}

// WriteFiles writes, creates or deletes files all or nothing.
func (c *Client) WriteFiles(ctx context.Context, r *proto.WriteFilesRequest) error {
	if err := c.needWriteMetadata(r); err != nil {
		return err
	}
	_, err := c.call(ctx, &proto.Request{Op: proto.OpWriteFiles, WriteFiles: r})
	return err
}

// Stat describes one path inside r.Root.
func (c *Client) Stat(ctx context.Context, r *proto.StatRequest) (*proto.StatResponse, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpStat, Stat: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Stat, proto.OpStat)
}

// Walk lists the regular files under a directory.
func (c *Client) Walk(ctx context.Context, r *proto.WalkRequest) (*proto.WalkResponse, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpWalk, Walk: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Walk, proto.OpWalk)
}

// Exec runs a command to completion. Cancelling ctx closes the stream, which
// kills the command's process group.
func (c *Client) Exec(ctx context.Context, r *proto.ExecRequest) (*proto.ExecResponse, error) {
	if err := c.needAccounts(r.User); err != nil {
		return nil, err
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpExec, Exec: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Exec, proto.OpExec)
}

// ExecStream is Exec that hands the command's output to out while it runs
// (proto.ExecRequest.Stream), on this goroutine, so out must not block. The
// response is the same as Exec's. An agent that predates streaming responds
// as Exec does and out is never called.
func (c *Client) ExecStream(ctx context.Context, r *proto.ExecRequest, out func(*proto.ExecOutput)) (*proto.ExecResponse, error) {
	if err := c.needAccounts(r.User); err != nil {
		return nil, err
	}
	sr := *r
	sr.Stream = true
	st, resp, err := c.openWith(ctx, &proto.Request{Op: proto.OpExec, Exec: &sr}, out)
	if err != nil {
		return nil, err
	}
	st.Close()
	return need(resp.Exec, proto.OpExec)
}

// Spawn starts a long-lived process owned by the daemon.
func (c *Client) Spawn(ctx context.Context, r *proto.SpawnRequest) (*proto.ProcessInfo, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpSpawn, Spawn: r})
	if err != nil {
		return nil, err
	}
	s, err := need(resp.Spawn, proto.OpSpawn)
	if err != nil {
		return nil, err
	}
	return &s.Process, nil
}

// Attach connects to a process's stream ("stdin", "stdout", "stderr", "fdN").
// ctx bounds only the attaching; the returned pipe lives until closed. A new
// attach to the same stream replaces this one (its pipe is closed). Closing
// a stdin (or input fdN) attachment gives the process EOF; a dropped session
// does not.
func (c *Client) Attach(ctx context.Context, id, stream string) (io.ReadWriteCloser, error) {
	st, _, err := c.open(ctx, &proto.Request{Op: proto.OpAttach, Attach: &proto.AttachRequest{ID: id, Stream: stream}})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Signal sends a signal to a process, or to its process group.
func (c *Client) Signal(ctx context.Context, r *proto.SignalRequest) error {
	_, err := c.call(ctx, &proto.Request{Op: proto.OpSignal, Signal: r})
	return err
}

// Wait waits up to r.Timeout for a process to exit; Running is set in the
// response when it has not.
func (c *Client) Wait(ctx context.Context, r *proto.WaitRequest) (*proto.ProcessInfo, error) {
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpWait, Wait: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Process, proto.OpWait)
}

// List lists the daemon's processes, oldest first.
func (c *Client) List(ctx context.Context, r *proto.ListRequest) ([]proto.ProcessInfo, error) {
	if r == nil {
		r = &proto.ListRequest{}
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpList, List: r})
	if err != nil {
		return nil, err
	}
	l, err := need(resp.List, proto.OpList)
	if err != nil {
		return nil, err
	}
	return l.Processes, nil
}

// Dial connects to a socket inside the sandbox. ctx bounds only the dialing.
func (c *Client) Dial(ctx context.Context, r *proto.DialRequest) (net.Conn, error) {
	st, _, err := c.open(ctx, &proto.Request{Op: proto.OpDial, Dial: r})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Claim makes this session the sandbox's owner at epoch (see
// proto.ClaimRequest): every other session that claimed a lower epoch is
// closed, its running requests ended, before Claim returns. A claim below
// the highest the agent accepted, or at it by another holder, fails with
// errdefs.ErrFailedPrecondition: the caller no longer owns the sandbox. Once
// another session's claim supersedes this one, the session is closed.
func (c *Client) Claim(ctx context.Context, holder string, epoch int64) error {
	if c.hello != nil && !c.hello.Fencing {
		return errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates fencing and cannot be claimed by a replica; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	_, err := c.call(ctx, &proto.Request{Op: proto.OpClaim, Claim: &proto.ClaimRequest{Holder: holder, Epoch: epoch}})
	return err
}

// SetEnv sets the sandbox's environment: every command the agent starts
// afterwards gets env over the image's environment and under its request's
// own (proto.SetEnvRequest). It is set once, when a pool sandbox is
// claimed, before any command ran; otherwise it fails with
// errdefs.ErrFailedPrecondition, unless env is what was set already.
func (c *Client) SetEnv(ctx context.Context, env map[string]string) error {
	if c.hello != nil && !c.hello.SandboxEnv {
		return errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates setting a sandbox's environment; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	_, err := c.call(ctx, &proto.Request{Op: proto.OpSetEnv, SetEnv: &proto.SetEnvRequest{Env: env}})
	return err
}

// Done is closed when the session has ended (pipe dropped or Close).
func (c *Client) Done() <-chan struct{} { return c.sess.CloseChan() }

// Close ends the session; processes in the sandbox keep running.
func (c *Client) Close() error {
	c.closing.Store(true)
	return c.sess.Close()
}

// call runs a request/response exchange: on a kept stream when the op and
// the daemon allow it (reuse.go), else on a fresh one.
func (c *Client) call(ctx context.Context, req *proto.Request) (*proto.Response, error) {
	if c.reuses(req.Op) {
		return c.callAgain(ctx, req)
	}
	st, resp, err := c.open(ctx, req)
	if err != nil {
		return nil, err
	}
	st.Close()
	return resp, nil
}

// open opens a stream, sends req and reads the response; ctx's deadline and
// cancellation apply to the whole exchange. On success the stream is
// returned with no deadline, for the streaming ops.
func (c *Client) open(ctx context.Context, req *proto.Request) (*yamux.Stream, *proto.Response, error) {
	return c.openWith(ctx, req, nil)
}

// openWith is open that hands the output frames before the response (a
// streamed exec's) to onOutput, on this goroutine, and skips them when
// onOutput is nil.
func (c *Client) openWith(ctx context.Context, req *proto.Request, onOutput func(*proto.ExecOutput)) (*yamux.Stream, *proto.Response, error) {
	return c.exchange(ctx, nil, req, onOutput)
}

// exchange is openWith on st, a kept stream, or on a fresh one when st is
// nil. On failure the stream is closed.
func (c *Client) exchange(ctx context.Context, st *yamux.Stream, req *proto.Request, onOutput func(*proto.ExecOutput)) (*yamux.Stream, *proto.Response, error) {
	if err := ctx.Err(); err != nil {
		if st != nil {
			st.Close()
		}
		return nil, nil, ctxError(err, req.Op, 0)
	}
	ctx, cancel, own := c.withOpDeadline(ctx, req)
	defer cancel()
	if st == nil {
		var err error
		if st, err = c.sess.OpenStream(); err != nil {
			return nil, nil, c.endedError(ctx, err, req.Op)
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		st.SetDeadline(dl)
	}
	// Cancellation closes the stream: the daemon sees it end and stops the
	// work (an exec's process group is killed), and our read returns.
	stop := context.AfterFunc(ctx, func() {
		st.SetDeadline(time.Now())
		st.Close()
	})
	// A sandbox that stopped responding (paused in its engine) ends the
	// call with the owner's error message instead of a long wait.
	var stalled error
	// Its close is sent on a goroutine of its own: a pipe that takes
	// nothing would hold the sender for yamux's write timeout.
	endStall := c.watchStall(ctx, func(err error) {
		stalled = err
		st.SetDeadline(time.Now())
		go st.Close()
	})
	var resp proto.Response
	raw := c.raw(req.Op)
	err := c.writeRequest(st, req, raw)
	for err == nil {
		resp = proto.Response{}
		if err = proto.ReadFrame(st, &resp); err != nil || resp.Output == nil {
			break
		}
		if onOutput != nil {
			onOutput(resp.Output)
		}
	}
	if err == nil && raw && resp.Error == nil && req.Op != proto.OpWriteFiles {
		var blobs [][]byte
		if blobs, err = proto.ReadRaw(st, proto.MaxRawTotal); err == nil {
			err = resp.PutData(blobs)
		}
	}
	endStall() // stalled is read only after the watcher has ended
	if stalled != nil {
		stop()
		return nil, nil, stalled
	}
	if !stop() || ctx.Err() != nil {
		st.Close()
		return nil, nil, ctxError(ctx.Err(), req.Op, own)
	}
	if err != nil {
		st.Close()
		if errors.Is(err, yamux.ErrTimeout) {
			return nil, nil, ctxError(context.DeadlineExceeded, req.Op, own)
		}
		return nil, nil, c.endedError(ctx, err, req.Op)
	}
	st.SetDeadline(time.Time{})
	if resp.Error != nil {
		// The response was read whole: a stream the daemon keeps serves the
		// next call.
		if req.Again && resp.Kept {
			c.putIdle(st)
		} else {
			st.Close()
		}
		return nil, nil, errdefs.FromCode(resp.Error.Code, resp.Error.Message)
	}
	return st, &resp, nil
}

// raw says whether op's file data travels as raw frames: the ops that
// carry file data, to a daemon that takes them (proto.Request.Raw).
func (c *Client) raw(op proto.Op) bool {
	if c.hello == nil || !c.hello.RawData {
		return false
	}
	return op == proto.OpReadFile || op == proto.OpReadFiles || op == proto.OpWriteFiles
}

// writeRequest writes req's frame, with raw set followed by its file data
// as raw frames; the caller's request is not changed.
func (c *Client) writeRequest(st *yamux.Stream, req *proto.Request, raw bool) error {
	if !raw {
		return proto.WriteFrame(st, req)
	}
	r := *req
	r.Raw = true
	var blobs [][]byte
	if r.WriteFiles != nil {
		r.WriteFiles, blobs = r.WriteFiles.TakeData()
	}
	if r.Op != proto.OpWriteFiles {
		return proto.WriteFrame(st, &r)
	}
	return proto.WriteMessage(st, &r, blobs)
}

func (c *Client) sessionError(err error, op proto.Op) error {
	if c.ended(err) {
		return errdefs.Unavailable("the sandbox agent session has ended during %s; reconnect to the sandbox and retry", op)
	}
	return errdefs.Internal("agent %s failed: %v", op, err)
}

// ctxError says why a call ended early; own is the call's own deadline
// when that was the one in force (0: the caller's).
func ctxError(err error, op proto.Op, own time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		if own > 0 {
			return errdefs.DeadlineExceeded("agent %s did not finish within its own deadline of %s: the sandbox did not answer (its file system or the container may be stuck); retry, and check the sandbox if it happens again", op, own)
		}
		return errdefs.DeadlineExceeded("agent %s did not finish before the deadline", op)
	}
	return fmt.Errorf("agent %s cancelled: %w", op, err)
}

// need checks that the response carries the body for op.
func need[T any](v *T, op proto.Op) (*T, error) {
	if v == nil {
		return nil, errdefs.Internal("the agent's answer to %s has no body; the agent and sandboxd may be out of step", op)
	}
	return v, nil
}
