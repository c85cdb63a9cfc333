package agent

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Ports lists the TCP ports listening inside the sandbox, by port, with
// the process holding each where the agent could find it.
func (c *Client) Ports(ctx context.Context) ([]proto.ListeningPort, error) {
	if c.hello != nil && !c.hello.Ports {
		return nil, errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates listing ports; restart the sandbox's agent with the current sandbox-agent binary",
			c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpPorts})
	if err != nil {
		return nil, err
	}
	l, err := need(resp.Ports, proto.OpPorts)
	if err != nil {
		return nil, err
	}
	return l.Ports, nil
}
