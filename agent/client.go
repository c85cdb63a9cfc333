// Package agent is sandboxd's side of the sandbox-agent protocol (see
// agent/proto): a Client multiplexes requests as yamux streams over the one
// byte stream that an exec of `sandbox-agent attach` provides.
package agent

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// SKELETON: signatures fixed; bodies are being implemented.

var errTODO = errors.New("agent client: not implemented yet")

// Client is one session to one agent daemon. It is safe for concurrent use.
type Client struct{}

// NewClient starts a session over rwc (the attach exec's stdio) and checks
// the daemon's version with a hello. The client owns rwc.
func NewClient(ctx context.Context, rwc io.ReadWriteCloser) (*Client, error) { return nil, errTODO }

// Hello returns the daemon's identity.
func (c *Client) Hello(ctx context.Context) (*proto.HelloResponse, error) { return nil, errTODO }

func (c *Client) ReadFile(ctx context.Context, r *proto.ReadFileRequest) (*proto.ReadFileResponse, error) {
	return nil, errTODO
}

func (c *Client) ReadFiles(ctx context.Context, r *proto.ReadFilesRequest) (*proto.ReadFilesResponse, error) {
	return nil, errTODO
}

func (c *Client) WriteFiles(ctx context.Context, r *proto.WriteFilesRequest) error { return errTODO }

func (c *Client) Stat(ctx context.Context, r *proto.StatRequest) (*proto.StatResponse, error) {
	return nil, errTODO
}

func (c *Client) Walk(ctx context.Context, r *proto.WalkRequest) (*proto.WalkResponse, error) {
	return nil, errTODO
}

func (c *Client) Exec(ctx context.Context, r *proto.ExecRequest) (*proto.ExecResponse, error) {
	return nil, errTODO
}

func (c *Client) Spawn(ctx context.Context, r *proto.SpawnRequest) (*proto.ProcessInfo, error) {
	return nil, errTODO
}

// Attach connects to a process's stream ("stdin", "stdout", "stderr", "fdN").
func (c *Client) Attach(ctx context.Context, id, stream string) (io.ReadWriteCloser, error) {
	return nil, errTODO
}

func (c *Client) Signal(ctx context.Context, r *proto.SignalRequest) error { return errTODO }

func (c *Client) Wait(ctx context.Context, r *proto.WaitRequest) (*proto.ProcessInfo, error) {
	return nil, errTODO
}

func (c *Client) List(ctx context.Context, r *proto.ListRequest) ([]proto.ProcessInfo, error) {
	return nil, errTODO
}

// Dial connects to a socket inside the sandbox.
func (c *Client) Dial(ctx context.Context, r *proto.DialRequest) (net.Conn, error) {
	return nil, errTODO
}

// Done is closed when the session has ended (pipe dropped or Close).
func (c *Client) Done() <-chan struct{} { return nil }

// Close ends the session; processes in the sandbox keep running.
func (c *Client) Close() error { return errTODO }
