package agent

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Every agent operation ends by a deadline of its own, whatever its
// caller's context allows: a call stuck in the sandbox (a file system that
// does not respond, a frozen container) fails with an error message instead of
// holding its caller, and whatever queues behind that caller, for good. An
// earlier deadline of the caller's still wins.
const (
	// defaultQuickTimeout bounds hello, stat, spawn, signal, list, claim,
	// set_env and the attaching of attach and dial.
	defaultQuickTimeout = 30 * time.Second
	// defaultFileTimeout bounds reads, writes and walks: a batch of large
	// files or a walk of a big tree takes a while on a loaded sandbox.
	defaultFileTimeout = 2 * time.Minute
	// opGrace is what exec and wait get beyond their own timeout, for the
	// agent to kill, reap and respond.
	opGrace = time.Minute
	// defaultExecTimeout mirrors the agent's for an exec without one.
	defaultExecTimeout = 10 * time.Minute
)

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithOpTimeouts sets the deadlines of the quick operations and of the file
// operations (default 30 s and 2 min); exec, wait and proc_get always get
// their own timeout plus a minute.
func WithOpTimeouts(quick, file time.Duration) ClientOption {
	return func(c *Client) { c.quick, c.file = quick, file }
}

// opTimeout is req's own deadline.
func (c *Client) opTimeout(req *proto.Request) time.Duration {
	switch req.Op {
	case proto.OpReadFile, proto.OpReadFiles, proto.OpWriteFiles, proto.OpWalk, proto.OpXattrs:
		return c.file
	case proto.OpExec:
		t := defaultExecTimeout
		if req.Exec != nil && req.Exec.Timeout > 0 {
			t = req.Exec.Timeout
		}
		return t + opGrace
	case proto.OpWait:
		var t time.Duration
		if req.Wait != nil {
			t = req.Wait.Timeout
		}
		return t + opGrace
	case proto.OpProcGet:
		var t time.Duration
		if req.ProcGet != nil {
			t = req.ProcGet.Wait
		}
		return t + opGrace
	case proto.OpDial:
		if req.Dial != nil && req.Dial.Timeout > c.quick {
			return req.Dial.Timeout + opGrace
		}
	}
	return c.quick
}

// withOpDeadline bounds ctx by req's own deadline; own reports whether
// that deadline is the one in force (so an error can name it).
func (c *Client) withOpDeadline(ctx context.Context, req *proto.Request) (context.Context, context.CancelFunc, time.Duration) {
	d := c.opTimeout(req)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}, 0
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, d
}
