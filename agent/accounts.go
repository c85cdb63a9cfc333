package agent

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Extended attributes (proto.WriteFile.Xattrs), read back by Xattrs.

// needXattrs refuses extended attributes to an agent that would drop them.
func (c *Client) needXattrs() error {
	if c.hello == nil || c.hello.Xattrs {
		return nil
	}
	return errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates extended attributes; restart the sandbox's agent with the current sandbox-agent binary",
		c.hello.PID, c.hello.StartedAt.Format(time.RFC3339))
}

// Xattrs reads the extended attributes whose names begin with r.Prefix of
// each of r.Paths (absolute paths in the sandbox; see proto.OpXattrs): a
// path without any, or whose attributes cannot be read, is left out.
func (c *Client) Xattrs(ctx context.Context, r *proto.XattrsRequest) (*proto.XattrsResponse, error) {
	if err := c.needXattrs(); err != nil {
		return nil, err
	}
	resp, err := c.call(ctx, &proto.Request{Op: proto.OpXattrs, Xattrs: r})
	if err != nil {
		return nil, err
	}
	return need(resp.Xattrs, proto.OpXattrs)
}
