package agent

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Streams the agent opens: the one direction sandboxd does not start. A
// program in a sandbox in network mode "proxy" connects to the agent's
// loopback proxy, and the agent carries the connection here on a stream
// that begins with a proto.Incoming frame. The client serves such streams
// only once a handler is set (HandleIncoming); until then, and for a kind
// the handler does not take, it closes them.

const (
	// incomingFrameWait bounds reading the Incoming frame of a new stream.
	incomingFrameWait = 10 * time.Second
	// maxIncoming caps the streams the agent opened that are being served
	// at once: the agent is inside the sandbox, and a sandbox that took it
	// over must not be able to make sandboxd hold goroutines without end.
	// A stream over the cap is closed at once (the program sees its
	// connection end); the egress gate's own cap is far lower.
	maxIncoming = 4096
)

// IncomingHandler serves one stream the agent opened, of the kind its frame
// names; it owns conn and must close it. It runs on its own goroutine.
type IncomingHandler func(in proto.Incoming, conn net.Conn)

// incoming holds the handler (nil: streams are closed unread).
type incoming struct {
	handler atomic.Pointer[IncomingHandler]
	serving atomic.Int64 // streams being served now
}

// HandleIncoming sets the handler of the streams the agent opens; nil
// stops serving them (streams already handed over keep going).
func (c *Client) HandleIncoming(h IncomingHandler) {
	if h == nil {
		c.in.handler.Store(nil)
		return
	}
	c.in.handler.Store(&h)
}

// acceptIncoming accepts the streams the agent opens until the session
// ends. Goroutine: one per Client, ended by the session's end.
func (c *Client) acceptIncoming() {
	for {
		st, err := c.sess.AcceptStream()
		if err != nil {
			return
		}
		if c.in.serving.Add(1) > maxIncoming {
			c.in.serving.Add(-1)
			st.Close()
			continue
		}
		go func() {
			defer c.in.serving.Add(-1)
			st.SetReadDeadline(time.Now().Add(incomingFrameWait))
			var in proto.Incoming
			err := proto.ReadFrame(st, &in)
			st.SetReadDeadline(time.Time{})
			h := c.in.handler.Load()
			if err != nil || h == nil {
				st.Close()
				return
			}
			(*h)(in, st)
		}()
	}
}

// Egress turns on the sandbox's egress proxy (proto.EgressRequest): the
// agent listens on a loopback port, sets the proxy and CA variables for
// every command it starts from now on, and carries each connection to
// this client as an Incoming stream. Call HandleIncoming first, or the
// first connections are closed unread.
func (c *Client) Egress(ctx context.Context, caPEM string) (*proto.EgressResponse, error) {
	if c.hello != nil && !c.hello.Egress {
		return nil, errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates the egress proxy, so this sandbox cannot use network mode \"proxy\"; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpEgress, Egress: &proto.EgressRequest{CACert: caPEM}})
	if err != nil {
		return nil, err
	}
	if resp.Egress == nil {
		return nil, errdefs.Internal("the agent's egress response has no body")
	}
	return resp.Egress, nil
}
