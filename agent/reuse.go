package agent

import (
	"context"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// maxIdleStreams caps the streams a client keeps for reuse: as many as
// calls that overlap in practice; a burst past it closes the extra ones.
const maxIdleStreams = 8

// idleStream is a stream kept for the next reusable call.
type idleStream struct {
	st    *yamux.Stream
	since time.Time
}

// reuses reports whether op's call may run on a kept stream: the op is
// one whose exchange is its request and response (proto.Reusable), and the
// daemon honours Request.Again.
func (c *Client) reuses(op proto.Op) bool {
	return c.hello != nil && c.hello.StreamReuse && proto.Reusable(op)
}

// callAgain is call on a kept stream (or a fresh one when none is kept),
// asking the daemon to keep it; the stream goes back to the client's pool
// once its response was read whole and says the daemon kept it, and is closed
// on any failure (a cancellation included), so a stream in the pool never
// holds half an exchange nor one the daemon let go.
func (c *Client) callAgain(ctx context.Context, req *proto.Request) (*proto.Response, error) {
	again := *req // the caller's request is not changed
	again.Again = true
	st, resp, err := c.exchange(ctx, c.takeIdle(), &again, nil)
	if err != nil {
		return nil, err
	}
	if resp.Kept {
		c.putIdle(st)
	} else {
		st.Close()
	}
	return resp, nil
}

// takeIdle returns the most recently kept stream, or nil; streams idle for
// proto.ReuseIdle or longer are closed, not reused: the daemon waits twice
// as long for their next request, so a stream taken is never one it is
// giving up.
func (c *Client) takeIdle() *yamux.Stream {
	now := time.Now()
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	for n := len(c.idle); n > 0; n = len(c.idle) {
		is := c.idle[n-1]
		c.idle = c.idle[:n-1]
		if now.Sub(is.since) < proto.ReuseIdle {
			return is.st
		}
		is.st.Close()
	}
	return nil
}

// putIdle keeps st for the next reusable call, or closes it when the pool
// is full; the oldest kept streams are the first to go stale.
func (c *Client) putIdle(st *yamux.Stream) {
	now := time.Now()
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	for len(c.idle) > 0 && now.Sub(c.idle[0].since) >= proto.ReuseIdle {
		c.idle[0].st.Close()
		c.idle = c.idle[1:]
	}
	if len(c.idle) >= maxIdleStreams {
		st.Close()
		return
	}
	c.idle = append(c.idle, idleStream{st: st, since: now})
}
