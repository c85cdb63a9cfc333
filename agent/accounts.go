package agent

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Accounts and extended attributes: commands run as an account of the
// sandbox (proto.ExecRequest.User, proto.ProcStartRequest.User), files
// written for one (proto.WriteFilesRequest.Owner) and with extended
// attributes (proto.WriteFile.Xattrs), read back by Xattrs. An agent that
// predates them would ignore the fields, running the command or writing
// the files as root, or dropping the attributes, without a word: the
// client refuses to send them to it.

// needAccounts refuses a user to an agent that would ignore it.
func (c *Client) needAccounts(user string) error {
	if user == "" || c.hello == nil || c.hello.Accounts {
		return nil
	}
	return errdefs.FailedPrecondition("the sandbox agent (pid %d, started %s) predates running commands as another user, so %q cannot be honoured; restart the sandbox's agent with the current sandbox-agent binary",
		c.hello.PID, c.hello.StartedAt.Format(time.RFC3339), user)
}

// needWriteMetadata refuses an owner or attributes to an agent that
// would drop them.
func (c *Client) needWriteMetadata(r *proto.WriteFilesRequest) error {
	if err := c.needAccounts(r.Owner); err != nil {
		return err
	}
	for _, f := range r.Files {
		if len(f.Xattrs) > 0 {
			return c.needXattrs()
		}
	}
	return nil
}

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
